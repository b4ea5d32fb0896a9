package head

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// The golden head: testdata/golden-head.json, signed once by an ECDSA
// P-256 appliance certificate issued under testdata/fleet-ca.pem; and the
// same head signed by an Ed25519 appliance certificate issued under
// another fleet CA (testdata/ed25519/). Their signatures and the bytes
// both cover are fixed here; docs/audit-format.md shows the same worked
// examples.
const (
	goldenSignature        = "MEUCICTosSD7H924qIeQYRDEpcfgh28LJ4/9J4L4HxU81zESAiEAj17OGZ+HkKiKBjZoZ4c2g0SxdV+3zgQCL4GCKjsOe7w="
	goldenEd25519Signature = "tf3tNM6uf4J2GDAHUe3mNIdJ4T3XOJMft7SYTLPFVh0F69dNqCKszXUm1Qa1gZ0FnUVKxftEB3mQyUR8QpFbBA=="
	goldenBody             = "tollgate-audit/v1/acme/app_example/2026-03-01\n" +
		"3\n" +
		"rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=\n" +
		"last_sequence 7\n" +
		"signed_at 2026-03-01T12:01:00Z\n"
)

func readGolden(t *testing.T) (Head, []byte, []byte) {
	t.Helper()
	return readGoldenIn(t, "testdata")
}

// readGoldenIn reads the golden head and fleet CA of dir.
func readGoldenIn(t *testing.T, dir string) (Head, []byte, []byte) {
	t.Helper()
	raw, err := os.ReadFile(dir + "/golden-head.json")
	if err != nil {
		t.Fatal(err)
	}
	var h Head
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(dir + "/fleet-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return h, raw, caPEM
}

func TestGoldenHead(t *testing.T) {
	h, _, caPEM := readGolden(t)
	ca, err := fleet.ParseCertificatePEM(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if h.Signature != goldenSignature {
		t.Fatalf("golden signature changed: %s", h.Signature)
	}
	body, err := Body(h)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != goldenBody {
		t.Fatalf("body\n%q\nwant\n%q", body, goldenBody)
	}
	file, err := os.ReadFile("testdata/golden-body.txt")
	if err != nil || !bytes.Equal(file, body) {
		t.Fatalf("testdata/golden-body.txt differs from the body (%v)", err)
	}
	if err := Verify(h, ca); err != nil {
		t.Fatalf("golden head does not verify: %v", err)
	}
	if h.Final() {
		t.Fatal("a head signed during its day is not final")
	}
}

// TestGoldenEd25519Head: the golden head signed with an Ed25519 key covers
// the same body, its signature is the pure Ed25519 signature of that body
// (64 bytes, deterministic), and it verifies; neither golden signature
// verifies under the other golden's certificate.
func TestGoldenEd25519Head(t *testing.T) {
	h, _, caPEM := readGoldenIn(t, "testdata/ed25519")
	ca, err := fleet.ParseCertificatePEM(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if h.Signature != goldenEd25519Signature {
		t.Fatalf("golden signature changed: %s", h.Signature)
	}
	body, err := Body(h)
	if err != nil || string(body) != goldenBody {
		t.Fatalf("body\n%q (%v)\nwant\n%q", body, err, goldenBody)
	}
	if err := Verify(h, ca); err != nil {
		t.Fatalf("golden Ed25519 head does not verify: %v", err)
	}
	cert, err := fleet.ParseCertificatePEM([]byte(h.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	if kind, _ := fleet.KindOf(cert.PublicKey); kind != fleet.Ed25519 {
		t.Fatalf("golden certificate holds a %s key", kind)
	}
	ecHead, _, ecCA := readGolden(t)
	ecdsaCA, err := fleet.ParseCertificatePEM(ecCA)
	if err != nil {
		t.Fatal(err)
	}
	swapped := h
	swapped.Signature = ecHead.Signature
	if err := Verify(swapped, ca); err == nil {
		t.Fatal("an ECDSA signature verified under an Ed25519 certificate")
	}
	swapped = ecHead
	swapped.Signature = h.Signature
	if err := Verify(swapped, ecdsaCA); err == nil {
		t.Fatal("an Ed25519 signature verified under an ECDSA certificate")
	}
}

// TestDocWorkedExample checks that docs/audit-format.md shows exactly the
// golden bytes: the fleet CAs, the head JSONs and the checkpoint body.
func TestDocWorkedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/audit-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, headJSON, caPEM := readGolden(t)
	_, edHeadJSON, edCAPEM := readGoldenIn(t, "testdata/ed25519")
	for name, want := range map[string][]byte{
		"fleet CA PEM":           caPEM,
		"head JSON":              headJSON,
		"Ed25519 fleet CA PEM":   edCAPEM,
		"Ed25519 head JSON":      edHeadJSON,
		"Ed25519 body signature": []byte(goldenEd25519Signature),
		"checkpoint body":        []byte("```text\n" + goldenBody + "```\n"),
		"body signature":         []byte(goldenSignature),
		"root in base64":         []byte("rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc="),
		"origin of a head":       []byte("tollgate-audit/v1/acme/app_example/2026-03-01"),
	} {
		if !bytes.Contains(doc, want) {
			t.Errorf("docs/audit-format.md lacks the golden %s:\n%s", name, want)
		}
	}
}
