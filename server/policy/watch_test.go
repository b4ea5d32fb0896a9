package policy

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// waitFor polls cond until it holds; the test's own timeout bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestWatchFile(t *testing.T) {
	var logs lockedbuf.Buffer
	dir := regoBundle(t, "w1", allowRego)
	e, err := Load(context.Background(), dir, LoadOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.WatchFile(ctx, dir, 10*time.Millisecond) }()

	writeFiles(t, dir, map[string]string{".manifest": `{"revision": "w2-changed", "roots": ["tollgate"]}`})
	waitFor(t, "revision w2-changed", func() bool { return e.Active().Revision() == "w2-changed" })

	// A broken edit is refused once; the active bundle stays.
	writeFiles(t, dir, map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\n"})
	waitFor(t, "refusal log line", func() bool { return strings.Contains(logs.String(), "policy bundle refused") })
	if d := decide(t, e, chat(key("app", nil), unset)); !d.Allow || d.BundleRevision != "w2-changed" {
		t.Fatalf("after a broken edit: %+v", d)
	}

	// Fixing it activates the fix.
	writeFiles(t, dir, map[string]string{
		".manifest":             `{"revision": "w3", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego": strings.Replace(allowRego, `"ok"`, `"fixed"`, 1),
	})
	waitFor(t, "revision w3", func() bool { return e.Active().Revision() == "w3" })
	if d := decide(t, e, chat(key("app", nil), unset)); d.Reason != "fixed" {
		t.Fatalf("after the fix: %+v", d)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchFile returned %v", err)
	}
}

// A bundle reached through a symbolic link, as deployments point a
// "current" link at each release: edits in the target are seen, and so is
// the link pointed at another release.
func TestWatchFileThroughASymlink(t *testing.T) {
	dir := regoBundle(t, "s1", allowRego)
	link := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	e := load(t, link)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.WatchFile(ctx, link, 10*time.Millisecond) }()

	// The first poll compares contents whatever it finds; the edits after
	// it are seen only through the fingerprint.
	for _, rev := range []string{"s2-edited", "s2-edited-again"} {
		writeFiles(t, dir, map[string]string{".manifest": `{"revision": "` + rev + `", "roots": ["tollgate"]}`})
		waitFor(t, "revision "+rev, func() bool { return e.Active().Revision() == rev })
	}

	release := regoBundle(t, "s3-release", allowRego)
	next := link + ".next"
	if err := os.Symlink(release, next); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, link); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "revision s3-release", func() bool { return e.Active().Revision() == "s3-release" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWatchFileOtherPath loads a path other than the active one at once.
func TestWatchFileOtherPath(t *testing.T) {
	e := load(t, regoBundle(t, "first", allowRego))
	other := writeTarball(t, map[string]string{".manifest": `{"revision": "second"}`, "tollgate/gateway.rego": allowRego})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.WatchFile(ctx, other, time.Hour) }()
	waitFor(t, "revision second", func() bool { return e.Active().Revision() == "second" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := e.WatchFile(context.Background(), other, 0); err == nil {
		t.Fatal("zero interval accepted")
	}
}
