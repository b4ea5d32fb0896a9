package fleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var kinds = []KeyKind{Ed25519, ECDSAP256}

func mustApplianceKind(t *testing.T, ca *CA, id string, kind KeyKind) (*Appliance, []byte, []byte) {
	t.Helper()
	certPEM, keyPEM, err := IssueApplianceKind(ca, id, kind)
	if err != nil {
		t.Fatal(err)
	}
	app, err := ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return app, certPEM, keyPEM
}

// Each kind of appliance key is issued, saved, loaded and parsed back as
// that kind, verifies under the CA, and refuses a key of the other kind
// or of another certificate.
func TestApplianceKeyKinds(t *testing.T) {
	ca := mustCA(t)
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			app, certPEM, keyPEM := mustApplianceKind(t, ca, "app_kind", kind)
			if app.Kind != kind {
				t.Fatalf("parsed kind %s", app.Kind)
			}
			if got, err := KindOf(app.Cert.PublicKey); got != kind || err != nil {
				t.Fatalf("certificate key kind %s, %v", got, err)
			}
			if block, _ := pem.Decode(keyPEM); block == nil || block.Type != "PRIVATE KEY" {
				t.Fatalf("key file is not PKCS #8: %q", keyPEM)
			}
			dir := t.TempDir()
			if err := SaveAppliance(dir, certPEM, keyPEM); err != nil {
				t.Fatal(err)
			}
			loaded, err := LoadAppliance(filepath.Join(dir, ApplianceCertFile), filepath.Join(dir, ApplianceKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			if loaded.Kind != kind || !loaded.Cert.Equal(app.Cert) || !publicKeyEqual(loaded.Key.Public(), app.Key.Public()) {
				t.Fatal("LoadAppliance returned another appliance")
			}
			if id, err := Verify([]*x509.Certificate{app.Cert}, ca.Cert, time.Now()); id != "app_kind" || err != nil {
				t.Fatalf("Verify = %q, %v", id, err)
			}
			for _, other := range kinds {
				_, otherKey, err := IssueApplianceKind(ca, "app_kind", other)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ParseAppliance(certPEM, otherKey); err == nil || !strings.Contains(err.Error(), "does not match") {
					t.Fatalf("ParseAppliance with another %s key = %v", other, err)
				}
			}
		})
	}
	if _, _, err := IssueApplianceKind(ca, "app_kind", "rsa"); err == nil {
		t.Fatal("IssueApplianceKind issued an rsa key")
	}
}

// Keys written before Ed25519 keep loading: SEC 1 ("EC PRIVATE KEY") as
// well as PKCS #8 ECDSA P-256.
func TestParseApplianceSEC1Key(t *testing.T) {
	ca := mustCA(t)
	app, certPEM, _ := mustApplianceKind(t, ca, "app_sec1", ECDSAP256)
	der, err := x509.MarshalECPrivateKey(app.Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseAppliance(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if err != nil || parsed.Kind != ECDSAP256 {
		t.Fatalf("SEC 1 key: %v", err)
	}
}

// An RSA or P-384 key is no appliance key, in a certificate or a key file.
func TestApplianceKeyRefused(t *testing.T) {
	ca := mustCA(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		key  crypto.Signer
		want string
	}{
		{"RSA", rsaKey, "*rsa.PublicKey key"},
		{"P-384", p384, "P-384"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cert := craftKey(t, ca, "app_refused", tt.key, true)
			if _, err := Verify([]*x509.Certificate{cert}, ca.Cert, time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify = %v, want an error naming %s", err, tt.want)
			}
			keyPEM, err := encodeKey(tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseAppliance(encodeCert(cert.Raw), keyPEM); err == nil {
				t.Fatal("ParseAppliance accepted it")
			}
			if _, _, err := parseApplianceKey(keyPEM); err == nil {
				t.Fatal("parseApplianceKey accepted it")
			}
			if _, err := Sign(tt.key, []byte("body")); err == nil {
				t.Fatal("Sign signed with it")
			}
		})
	}
}

// A signature verifies with the certificate of its key alone: not over
// another body, not under a certificate of the other kind, and a signature
// of the wrong form is refused with an error, not a panic.
func TestSignAndCheckSignature(t *testing.T) {
	ca := mustCA(t)
	apps := map[KeyKind]*Appliance{}
	for _, kind := range kinds {
		apps[kind], _, _ = mustApplianceKind(t, ca, "app_sig", kind)
	}
	body := []byte("tollgate-audit/v1/acme/app_sig/2026-03-01\n3\n")
	for _, kind := range kinds {
		app := apps[kind]
		sig, err := app.Sign(body)
		if err != nil {
			t.Fatal(err)
		}
		if kind == Ed25519 && len(sig) != ed25519.SignatureSize {
			t.Fatalf("Ed25519 signature of %d bytes", len(sig))
		}
		if kind == Ed25519 && !ed25519.Verify(app.Cert.PublicKey.(ed25519.PublicKey), body, sig) {
			t.Fatal("not a pure Ed25519 signature of the body")
		}
		if err := CheckSignature(app.Cert, body, sig); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		tampered := append([]byte(nil), body...)
		tampered[0] ^= 1
		flipped := append([]byte(nil), sig...)
		flipped[len(flipped)-1] ^= 1
		tests := []struct {
			name string
			cert *x509.Certificate
			body []byte
			sig  []byte
		}{
			{"tampered body", app.Cert, tampered, sig},
			{"flipped signature", app.Cert, body, flipped},
			{"empty signature", app.Cert, body, nil},
			{"truncated signature", app.Cert, body, sig[:len(sig)-1]},
			{"longer signature", app.Cert, body, append(append([]byte(nil), sig...), 0)},
			{"garbage", app.Cert, body, []byte("not a signature at all, not a signature at all, not a signature!")},
		}
		for _, other := range kinds {
			if other != kind {
				tests = append(tests, struct {
					name string
					cert *x509.Certificate
					body []byte
					sig  []byte
				}{"under a " + string(other) + " certificate", apps[other].Cert, body, sig})
			}
		}
		for _, tt := range tests {
			t.Run(string(kind)+"/"+tt.name, func(t *testing.T) {
				if err := CheckSignature(tt.cert, tt.body, tt.sig); err == nil {
					t.Fatal("CheckSignature accepted it")
				}
			})
		}
	}
}

// BenchmarkCheckSignature is what a verifier pays per head or receipt
// signature, for each kind of appliance key.
func BenchmarkCheckSignature(b *testing.B) {
	ca, err := NewCA("bench fleet CA", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("tollgate-audit/v1/acme/app_bench/2026-03-01\n3\nrra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=\n")
	for _, kind := range kinds {
		certPEM, keyPEM, err := IssueApplianceKind(ca, "app_bench", kind)
		if err != nil {
			b.Fatal(err)
		}
		app, err := ParseAppliance(certPEM, keyPEM)
		if err != nil {
			b.Fatal(err)
		}
		sig, err := app.Sign(body)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(kind), func(b *testing.B) {
			for b.Loop() {
				if err := CheckSignature(app.Cert, body, sig); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
