package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// writeTarball writes files as an OPA bundle .tar.gz and returns its path.
func writeTarball(t testing.TB, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hdr := &tar.Header{Name: "/" + n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const allowRego = "package tollgate.gateway\n\ndecision := {\"allow\": true, \"reason\": \"ok\"}\n"

func TestLoadTarball(t *testing.T) {
	p := writeTarball(t, map[string]string{
		".manifest":             `{"revision": "tar-7", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego": allowRego,
	})
	e := load(t, p)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	d := decide(t, e, chat(key("app", nil), unset))
	if !d.Allow || d.BundleRevision != "tar-7" || d.BundleDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("decision = %+v", d)
	}
	if e.Active().Path() != p || e.Active().LoadedAt().IsZero() {
		t.Fatalf("active = %+v", e.Active())
	}
}

// TestDirectoryDigest: the digest covers every file (name and content),
// independently of how the directory was written.
func TestDirectoryDigest(t *testing.T) {
	files := map[string]string{".manifest": `{"revision": "r"}`, "tollgate/gateway.rego": allowRego}
	a, b := load(t, writeBundle(t, files)), load(t, writeBundle(t, files))
	if a.Active().Digest() != b.Active().Digest() {
		t.Fatalf("same files, digests %s and %s", a.Active().Digest(), b.Active().Digest())
	}
	// sha256 over "<sha256 of file>  <path>\n" sorted by path.
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var lines strings.Builder
	for _, name := range names {
		sum := sha256.Sum256([]byte(files[name]))
		lines.WriteString(hex.EncodeToString(sum[:]) + "  " + name + "\n")
	}
	sum := sha256.Sum256([]byte(lines.String()))
	if want := "sha256:" + hex.EncodeToString(sum[:]); a.Active().Digest() != want {
		t.Fatalf("digest = %s, want %s", a.Active().Digest(), want)
	}
	files["tollgate/data.json"] = `{}`
	if c := load(t, writeBundle(t, files)); c.Active().Digest() == a.Active().Digest() {
		t.Fatal("an added file did not change the digest")
	}
}

// TestRefusedBundleKeepsPrevious: a bundle that does not parse, compile,
// define the decision or evaluate is refused with a log line, and the
// previous bundle keeps deciding.
func TestRefusedBundleKeepsPrevious(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // in the error
	}{
		{name: "syntax error", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": true\n"}, want: "rego_parse_error"},
		{name: "unsafe variable", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": x}\n"}, want: "rego_unsafe_var_error"},
		{name: "v0 syntax", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision = {\"allow\": true} { true }\n"}, want: "rego_parse_error"},
		{name: "no decision rule", files: map[string]string{"tollgate/other.rego": "package tollgate.other\n\nallow := true\n"}, want: "defines no data.tollgate.gateway.decision"},
		{name: "fails on evaluation", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": true}\ndecision := {\"allow\": false} if input.version == 1\n"}, want: "fails on a sample request"},
		// The sample request carries every optional field.
		{name: "fails on evaluation with a reasoning effort", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": true}\ndecision := {\"allow\": false} if input.request.reasoning_effort\n"}, want: "fails on a sample request"},
		{name: "not a decision object", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := [1]\n"}, want: "not an object"},
		{name: "bad manifest", files: map[string]string{".manifest": "{", "tollgate/gateway.rego": allowRego}, want: "manifest"},
		{name: "empty directory", files: map[string]string{}, want: "no files"},
		{name: "wasm module", files: map[string]string{"tollgate/gateway.rego": allowRego, "tollgate/policy.wasm": "\x00asm\x01\x00\x00\x00"}, want: "Wasm modules"},
		{name: "network builtin", files: map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"}).status_code == 200}\n"}, want: "unsafe built-in function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs lockedbuf.Buffer
			good := regoBundle(t, "good-1", allowRego)
			e, err := Load(context.Background(), good, LoadOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			bad := writeBundle(t, tt.files)
			err = e.ReloadFrom(context.Background(), bad)
			if !errors.Is(err, ErrBundleRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReloadFrom = %v, want ErrBundleRefused containing %q", err, tt.want)
			}
			if !strings.Contains(logs.String(), `"msg":"policy bundle refused; previous bundle stays active"`) ||
				!strings.Contains(logs.String(), `"active_revision":"good-1"`) {
				t.Fatalf("no refusal log line:\n%s", logs.String())
			}
			if d := decide(t, e, chat(key("app", nil), unset)); !d.Allow || d.BundleRevision != "good-1" {
				t.Fatalf("after refusal: %+v", d)
			}
			if e.Active().Path() != good {
				t.Fatalf("active path = %s", e.Active().Path())
			}
			// The engine cannot start on such a bundle.
			if _, err := Load(context.Background(), bad, LoadOptions{}); err == nil {
				t.Fatal("Load of a refused bundle succeeded")
			}
		})
	}
}

func TestLoadMissingPath(t *testing.T) {
	if _, err := Load(context.Background(), filepath.Join(t.TempDir(), "nope"), LoadOptions{}); err == nil {
		t.Fatal("Load of a missing path succeeded")
	}
	if _, err := Load(context.Background(), writeTarball(t, nil)+".missing", LoadOptions{}); err == nil {
		t.Fatal("Load of a missing tarball succeeded")
	}
	p := filepath.Join(t.TempDir(), "not-a-tarball.tar.gz")
	if err := os.WriteFile(p, []byte("plain text"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), p, LoadOptions{}); err == nil {
		t.Fatal("Load of a corrupt tarball succeeded")
	}
}

// TestReload re-reads the active path.
func TestReload(t *testing.T) {
	dir := regoBundle(t, "r1", allowRego)
	e := load(t, dir)
	writeFiles(t, dir, map[string]string{".manifest": `{"revision": "r2", "roots": ["tollgate"]}`})
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := decide(t, e, chat(key("app", nil), unset)).BundleRevision; got != "r2" {
		t.Fatalf("revision after reload = %s", got)
	}
}

// TestEvaluationError: a bundle that fails for some requests only returns
// an error for them (no decision), never an allow.
func TestEvaluationError(t *testing.T) {
	e := load(t, regoBundle(t, "conflict", `package tollgate.gateway

decision := {"allow": true}
decision := {"allow": false} if input.key.label == "boom"
`))
	if _, err := e.Decide(context.Background(), chat(key("boom", nil), unset)); err == nil {
		t.Fatal("conflicting outputs did not fail the decision")
	}
	if d := decide(t, e, chat(key("app", nil), unset)); !d.Allow {
		t.Fatalf("other requests: %+v", d)
	}
}
