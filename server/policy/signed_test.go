package policy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// keyPair is a PEM private key and its PEM public key.
type keyPair struct{ private, public string }

func ecKeyPair(t testing.TB) keyPair {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return encodeKeyPair(t, k, &k.PublicKey)
}

func rsaKeyPair(t testing.TB) keyPair {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return encodeKeyPair(t, k, &k.PublicKey)
}

func encodeKeyPair(t testing.TB, private, public any) keyPair {
	t.Helper()
	priv, err := x509.MarshalPKCS8PrivateKey(private)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{
		private: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

// signDir signs a directory bundle with OPA's Go signing API, as
// `opa sign --bundle .` run inside it would: every file is hashed under its
// path relative to the bundle root, and .signatures.json is written.
func signDir(t testing.TB, dir, privateKey, alg string) {
	t.Helper()
	signDirClaims(t, dir, privateKey, alg, "")
}

// signDirClaims is signDir adding the claims of the JSON file claimsPath
// to the signature, as `opa sign --claims-file` does; "" adds none.
func signDirClaims(t testing.TB, dir, privateKey, alg, claimsPath string) {
	t.Helper()
	h, err := opabundle.NewSignatureHasher(opabundle.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var files []opabundle.FileInfo
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || opabundle.IsSignaturesFile(p) {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		var v any = raw
		if opabundle.IsStructuredDoc(rel) { // JSON and YAML are hashed by value
			if err := util.Unmarshal(raw, &v); err != nil {
				return err
			}
		}
		sum, err := h.HashFile(v)
		if err != nil {
			return err
		}
		files = append(files, opabundle.NewFile(rel, hex.EncodeToString(sum), string(opabundle.SHA256)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	token, err := opabundle.GenerateSignedToken(files, opabundle.NewSigningConfig(privateKey, alg, claimsPath), "")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := json.Marshal(map[string][]string{"signatures": {token}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".signatures.json"), sig, 0o644); err != nil {
		t.Fatal(err)
	}
}

// signedBundle is a signed copy of a one-module bundle.
func signedBundle(t testing.TB, revision, privateKey, alg string) string {
	t.Helper()
	dir := regoBundle(t, revision, allowRego)
	signDir(t, dir, privateKey, alg)
	return dir
}

// TestSignedBundle: with a verification key every bundle must be signed by
// it and unmodified since; anything else is refused and the previous
// bundle keeps serving.
func TestSignedBundle(t *testing.T) {
	kp, other := ecKeyPair(t), ecKeyPair(t)
	opts := LoadOptions{VerificationKey: kp.public, Algorithm: "ES256"}
	e, err := Load(context.Background(), signedBundle(t, "signed-1", kp.private, "ES256"), opts)
	if err != nil {
		t.Fatalf("signed bundle refused: %v", err)
	}

	tampered := signedBundle(t, "signed-2", kp.private, "ES256")
	writeFiles(t, tampered, map[string]string{"tollgate/gateway.rego": strings.Replace(allowRego, `"ok"`, `"tampered"`, 1)})
	addedFile := signedBundle(t, "signed-2", kp.private, "ES256")
	writeFiles(t, addedFile, map[string]string{"tollgate/extra.rego": "package tollgate.extra\n\nx := 1\n"})
	manifest := signedBundle(t, "signed-2", kp.private, "ES256")
	writeFiles(t, manifest, map[string]string{".manifest": `{"revision": "forged", "roots": ["tollgate"]}`})

	tests := []struct {
		name string
		path string
		want string
	}{
		{name: "tampered module", path: tampered, want: "digest mismatch"},
		{name: "file added after signing", path: addedFile, want: "not included in bundle signature"},
		{name: "tampered manifest", path: manifest, want: "digest mismatch"},
		{name: "signed with another key", path: signedBundle(t, "signed-2", other.private, "ES256"), want: "verify"},
		{name: "unsigned", path: regoBundle(t, "unsigned", allowRego), want: "missing .signatures.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.ReloadFrom(context.Background(), tt.path)
			if !errors.Is(err, ErrBundleRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReloadFrom = %v, want a refusal containing %q", err, tt.want)
			}
			if d := decide(t, e, chat(key("app", nil), unset)); d.BundleRevision != "signed-1" || d.Reason != "ok" {
				t.Fatalf("old bundle not serving: %+v", d)
			}
		})
	}

	if err := e.ReloadFrom(context.Background(), signedBundle(t, "signed-3", kp.private, "ES256")); err != nil {
		t.Fatalf("second signed bundle refused: %v", err)
	}
	if d := decide(t, e, chat(key("app", nil), unset)); d.BundleRevision != "signed-3" {
		t.Fatalf("revision = %s", d.BundleRevision)
	}
}

// TestSignedBundleDefaults: RS256 and key id "default" when not given; a
// signed bundle without a configured key is refused (it cannot be checked).
func TestSignedBundleDefaults(t *testing.T) {
	kp := rsaKeyPair(t)
	dir := signedBundle(t, "rsa-1", kp.private, "RS256")
	e, err := Load(context.Background(), dir, LoadOptions{VerificationKey: kp.public})
	if err != nil {
		t.Fatalf("RS256 signed bundle refused: %v", err)
	}
	if got := e.Active().Revision(); got != "rsa-1" {
		t.Fatalf("revision = %s", got)
	}
	if _, err := Load(context.Background(), dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "verification key not provided") {
		t.Fatalf("signed bundle without a key: %v", err)
	}
	if _, err := Load(context.Background(), dir, LoadOptions{VerificationKey: kp.public, Scope: "write"}); err == nil {
		t.Fatal("scope mismatch accepted")
	}
}

// TestSignedBundleScope: the scope check fails closed. A bundle signed
// with a scope claim loads only when the same scope is configured; with
// none configured the signature must carry none, so it is refused.
func TestSignedBundleScope(t *testing.T) {
	kp := rsaKeyPair(t)
	claims := filepath.Join(t.TempDir(), "claims.json")
	if err := os.WriteFile(claims, []byte(`{"scope":"write"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	scoped := regoBundle(t, "scoped-1", allowRego)
	signDirClaims(t, scoped, kp.private, "RS256", claims)
	e, err := Load(context.Background(), scoped, LoadOptions{VerificationKey: kp.public, Scope: "write"})
	if err != nil {
		t.Fatalf("bundle signed with scope write refused under scope write: %v", err)
	}
	if got := e.Active().Revision(); got != "scoped-1" {
		t.Fatalf("revision = %s", got)
	}
	for _, scope := range []string{"", "read"} {
		if _, err := Load(context.Background(), scoped, LoadOptions{VerificationKey: kp.public, Scope: scope}); err == nil || !strings.Contains(err.Error(), "scope mismatch") {
			t.Fatalf("bundle signed with scope write, configured scope %q: %v, want a scope mismatch refusal", scope, err)
		}
	}
	// Without a scope on either side it loads.
	if _, err := Load(context.Background(), signedBundle(t, "unscoped-1", kp.private, "RS256"), LoadOptions{VerificationKey: kp.public}); err != nil {
		t.Fatalf("unscoped bundle refused without a scope: %v", err)
	}
}

// TestSignedTarball: a tarball signed with OPA's bundle writer verifies.
func TestSignedTarball(t *testing.T) {
	kp := ecKeyPair(t)
	dir := regoBundle(t, "tar-signed", allowRego)
	b, err := opabundle.NewCustomReader(opabundle.NewDirectoryLoader(dir)).WithRegoVersion(ast.RegoV1).Read()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.GenerateSignature(opabundle.NewSigningConfig(kp.private, "ES256", ""), "", true); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := opabundle.NewWriter(f).UseModulePath(true).DisableFormat(true).Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := Load(context.Background(), p, LoadOptions{VerificationKey: kp.public, Algorithm: "ES256"})
	if err != nil {
		t.Fatalf("signed tarball refused: %v", err)
	}
	if got := e.Active().Revision(); got != "tar-signed" {
		t.Fatalf("revision = %s", got)
	}
}
