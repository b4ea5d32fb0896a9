package policy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// defaultBundle is the bundle shipped in examples/policy.
const defaultBundle = "../../examples/policy"

var decisionIDPattern = regexp.MustCompile(`^dec_[0-9a-f]{32}$`)

// writeBundle writes files (path relative to the bundle root → content)
// into a new directory and returns it.
func writeBundle(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// regoBundle is a bundle with one policy module and a revision.
func regoBundle(t testing.TB, revision, rego string) string {
	t.Helper()
	return writeBundle(t, map[string]string{
		".manifest":             `{"revision": "` + revision + `", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego": rego,
	})
}

func load(t testing.TB, path string) *Engine {
	t.Helper()
	e, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return e
}

// key builds a principal; models nil means all models.
func key(label string, models []string, scopes ...string) *keys.Principal {
	return keys.NewPrincipal("acme", "key_test1", label, models == nil, models, 0, 0, scopes, time.Time{})
}

// chat is a chat completion request for builtin/echo offering tools.
func chat(k *keys.Principal, tc ToolChoice, tools ...string) Input {
	return Input{
		Key:         k,
		ApplianceID: "app_test",
		Time:        time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC),
		Request: Request{
			ID:           "req_test1",
			Endpoint:     EndpointChatCompletions,
			Model:        "builtin/echo",
			Tools:        tools,
			ToolChoice:   tc,
			MessageCount: 2,
		},
	}
}

func decide(t testing.TB, e *Engine, in Input) Decision {
	t.Helper()
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if !decisionIDPattern.MatchString(d.ID) {
		t.Fatalf("decision id %q does not match %s", d.ID, decisionIDPattern)
	}
	return d
}
