package log

import (
	"context"
	"crypto/x509"
	hexenc "encoding/hex"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/clocktest"
)

// day1 is the first day of most tests; the clock starts at noon.
var day1 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testPKI is a fleet CA and one appliance certificate under it.
type testPKI struct {
	ca  *x509.Certificate
	app *fleet.Appliance
}

func newTestPKI(t testing.TB, id string) testPKI {
	t.Helper()
	ca, err := fleet.NewCA("test fleet CA", day1.AddDate(0, -1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ca.Now = func() time.Time { return day1.AddDate(0, -1, 0) }
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, id)
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{ca: ca.Cert, app: app}
}

// env is an open log with its clock and PKI.
type env struct {
	dir string
	// journal is the log's journal directory; journalOpt is the
	// Options.JournalDir of newEnv, which reopen keeps.
	journal    string
	journalOpt string
	clock      *clocktest.Clock
	pki        testPKI
	log        *Log
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), journalOpt: opts.JournalDir, clock: clocktest.New(day1), pki: newTestPKI(t, "app_test")}
	e.journal = filepath.Join(e.dir, JournalDir)
	if opts.JournalDir != "" {
		e.journal = opts.JournalDir
	}
	e.reopen(t, opts)
	return e
}

// journalLayouts are where the tests that run in both put the journal:
// its default directory in the log's, and a directory of its own
// elsewhere (as on a disk of its own).
var journalLayouts = []struct {
	name string
	own  bool
}{{"default journal directory", false}, {"journal directory of its own", true}}

// withJournal returns opts with the journal in a directory of its own
// when own is set; Open creates it, parents included.
func withJournal(t *testing.T, opts Options, own bool) Options {
	if own {
		opts.JournalDir = filepath.Join(t.TempDir(), "fast", "journal")
	}
	return opts
}

// reopen opens the log of e (closing an open one first).
func (e *env) reopen(t *testing.T, opts Options) {
	t.Helper()
	if e.log != nil {
		if err := e.log.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if opts.JournalDir == "" {
		opts.JournalDir = e.journalOpt
	}
	opts.Now = e.clock.Now
	opts.Signer = e.pki.app
	l, err := Open(e.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.log = l
	t.Cleanup(func() { _ = l.Close() })
}

// event returns a valid event numbered n for tenant.
func event(n int, tenant string) Event {
	return Event{
		RequestID:        fmt.Sprintf("req_%s%d", tenant, n),
		TenantID:         tenant,
		KeyID:            "key_" + tenant,
		Time:             day1.Add(time.Duration(n) * time.Millisecond),
		Endpoint:         "/v1/chat/completions",
		Model:            "builtin/echo",
		Status:           200,
		PromptTokens:     int64(n),
		CompletionTokens: 3,
		RequestBody:      fmt.Appendf(nil, `{"n":%d}`, n),
		ResponseBody:     fmt.Appendf(nil, `{"tenant":%q}`, tenant),
	}
}

func (e *env) mustAppend(t *testing.T, ev Event) Receipt {
	t.Helper()
	r, err := e.log.Append(context.Background(), ev)
	if err != nil {
		t.Fatalf("Append %s: %v", ev.RequestID, err)
	}
	return r
}

func (e *env) mustSign(t *testing.T) []head.Head {
	t.Helper()
	heads, err := e.log.SignHeads(e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return heads
}

func hexOf(b []byte) string { return hexenc.EncodeToString(b) }

// encodeTestKey returns the appliance key in PEM, as the fleet tool writes it.
func encodeTestKey(app *fleet.Appliance) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(app.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
