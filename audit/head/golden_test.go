package head

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// The golden head: testdata/golden-head.json, signed once by an appliance
// certificate issued under testdata/fleet-ca.pem. Its signature and the
// bytes it covers are fixed here; docs/audit-format.md shows the same
// worked example.
const (
	goldenSignature = "MEUCICTosSD7H924qIeQYRDEpcfgh28LJ4/9J4L4HxU81zESAiEAj17OGZ+HkKiKBjZoZ4c2g0SxdV+3zgQCL4GCKjsOe7w="
	goldenBody      = "tollgate-audit/v1/acme/app_example/2026-03-01\n" +
		"3\n" +
		"rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=\n" +
		"last_sequence 7\n" +
		"signed_at 2026-03-01T12:01:00Z\n"
)

func readGolden(t *testing.T) (Head, []byte, []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden-head.json")
	if err != nil {
		t.Fatal(err)
	}
	var h Head
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile("testdata/fleet-ca.pem")
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

// TestDocWorkedExample checks that docs/audit-format.md shows exactly the
// golden bytes: the fleet CA, the head JSON and the checkpoint body.
func TestDocWorkedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/audit-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, headJSON, caPEM := readGolden(t)
	for name, want := range map[string][]byte{
		"fleet CA PEM":     caPEM,
		"head JSON":        headJSON,
		"checkpoint body":  []byte("```text\n" + goldenBody + "```\n"),
		"body signature":   []byte(goldenSignature),
		"root in base64":   []byte("rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc="),
		"origin of a head": []byte("tollgate-audit/v1/acme/app_example/2026-03-01"),
	} {
		if !bytes.Contains(doc, want) {
			t.Errorf("docs/audit-format.md lacks the golden %s:\n%s", name, want)
		}
	}
}
