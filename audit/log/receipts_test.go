package log

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// appendConcurrently appends n events of two tenants from n goroutines, so
// that they group into batches of several, and returns their receipts by
// request id.
func appendConcurrently(t *testing.T, l *Log, from, n int) map[string]Receipt {
	t.Helper()
	var (
		mu  sync.Mutex
		out = map[string]Receipt{}
		wg  sync.WaitGroup
	)
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := event(i, []string{"acme", "globex"}[i%2])
			r, err := l.Append(context.Background(), ev)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			out[ev.RequestID] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// TestReceiptsOfABatch: every append of a log with a signer gets a receipt
// that verifies against the fleet CA, names the event's place in the log,
// and is served again, byte for byte, by Log.Receipt; one signature covers
// a whole batch.
func TestReceiptsOfABatch(t *testing.T) {
	e := newEnv(t, Options{})
	got := appendConcurrently(t, e.log, 0, 64)
	statements := map[string]bool{}
	for id, r := range got {
		if r.Signed() == nil {
			t.Fatalf("%s: no receipt", id)
		}
		s := *r.Signed()
		if err := receipt.Verify(s, e.pki.ca); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if s.RequestID != id || s.Day != r.Day || s.Sequence != r.Sequence || s.LeafIndex != r.LeafIndex ||
			s.LeafHash != hexOf(r.LeafHash) || s.ApplianceID != "app_test" {
			t.Fatalf("%s: receipt %+v does not name the event's place %+v", id, s, r)
		}
		statements[s.Signature] = true
		rec, err := e.log.Event(id)
		if err != nil {
			t.Fatal(err)
		}
		if s.TenantID != rec.Leaf.TenantID || s.Time != rec.Leaf.Time {
			t.Fatalf("%s: receipt names %s at %s, the leaf %s at %s", id, s.TenantID, s.Time, rec.Leaf.TenantID, rec.Leaf.Time)
		}
		stored, err := e.log.Receipt(s.TenantID, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(stored, s) {
			t.Fatalf("%s: stored receipt\n%+v\ndiffers from the one appended\n%+v", id, stored, s)
		}
	}
	if n := int(e.log.Stats().Commits); len(statements) != n {
		t.Errorf("%d signed statements for %d commits, want one each", len(statements), n)
	}
	if len(statements) >= len(got) {
		t.Logf("no batch held two events (%d commits): the machine ran the appends one by one", len(statements))
	}
}

// TestReceiptOtherTenant: a tenant is told nothing of another tenant's
// receipts, nor of events that do not exist.
func TestReceiptOtherTenant(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	_, errOther := e.log.Receipt("globex", "req_acme1")
	_, errNone := e.log.Receipt("globex", "req_globex9")
	for _, err := range []error{errOther, errNone} {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	}
	if strings.ReplaceAll(errOther.Error(), "req_acme1", "ID") != strings.ReplaceAll(errNone.Error(), "req_globex9", "ID") {
		t.Errorf("another tenant's event is told apart from none: %q vs %q", errOther, errNone)
	}
}

// TestReceiptsSurviveReplayAndReopen: receipts are served after a reopen
// and after the journal is replayed into an audit.db that never saw the
// events (the process killed before its applier ran).
func TestReceiptsSurviveReplayAndReopen(t *testing.T) {
	e := newEnv(t, Options{ApplyInterval: time.Hour})
	// The applier's first round runs at once and the next an hour later:
	// one event applied first, so that the appends below all wait in the
	// journal (on a loaded machine they could otherwise all join that
	// first round, leaving nothing to replay).
	e.mustAppend(t, event(100, "acme"))
	if err := e.log.apply.caughtUp(); err != nil {
		t.Fatal(err)
	}
	got := appendConcurrently(t, e.log, 0, 24)
	// audit.db has applied none of them: a copy of the files now is the
	// disk of a process killed now.
	copied := copyTree(t, e.dir)

	l, err := Open(copied, Options{Now: e.clock.Now, Signer: e.pki.app, ApplyInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if got := l.Stats().Replayed; got == 0 {
		t.Fatal("nothing replayed: the test cannot tell")
	}
	e.reopen(t, Options{})
	for name, lg := range map[string]*Log{"replayed": l, "reopened": e.log} {
		for id, r := range got {
			stored, err := lg.Receipt("", id)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, id, err)
			}
			if !reflect.DeepEqual(stored, *r.Signed()) {
				t.Fatalf("%s: %s: stored receipt differs from the one appended", name, id)
			}
		}
	}
}

// TestNoReceiptWithoutSigner: a log without a signer records events
// without receipts and says so.
func TestNoReceiptWithoutSigner(t *testing.T) {
	l, err := Open(t.TempDir(), Options{ApplianceID: "app_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	r, err := l.Append(context.Background(), event(1, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Signed() != nil {
		t.Fatal("a receipt without a signer")
	}
	if _, err := l.Receipt("acme", "req_acme1"); !errors.Is(err, ErrNoReceipt) {
		t.Fatalf("got %v, want ErrNoReceipt", err)
	}
}

// TestReceiptTampered: a receipt fails to verify once any member changes.
func TestReceiptTampered(t *testing.T) {
	e := newEnv(t, Options{})
	got := appendConcurrently(t, e.log, 0, 8)
	var r receipt.Receipt
	for _, x := range got {
		r = *x.Signed()
		break
	}
	flipHex := func(s string) string {
		b := []byte(s)
		if b[0] == '0' {
			b[0] = '1'
		} else {
			b[0] = '0'
		}
		return string(b)
	}
	for name, change := range map[string]func(*receipt.Receipt){
		"request_id":   func(r *receipt.Receipt) { r.RequestID += "x" },
		"tenant_id":    func(r *receipt.Receipt) { r.TenantID = "other" },
		"sequence":     func(r *receipt.Receipt) { r.Sequence++ },
		"leaf_index":   func(r *receipt.Receipt) { r.LeafIndex++ },
		"time":         func(r *receipt.Receipt) { r.Time = "2026-03-01T12:00:00.000001Z" },
		"leaf_hash":    func(r *receipt.Receipt) { r.LeafHash = flipHex(r.LeafHash) },
		"batch_root":   func(r *receipt.Receipt) { r.BatchRoot = flipHex(r.BatchRoot) },
		"batch_size":   func(r *receipt.Receipt) { r.BatchSize++ },
		"signed_at":    func(r *receipt.Receipt) { r.SignedAt = "2026-03-01T13:00:00Z" },
		"day":          func(r *receipt.Receipt) { r.Day = "2026-03-02" },
		"appliance_id": func(r *receipt.Receipt) { r.ApplianceID = "app_other" },
		"signature": func(r *receipt.Receipt) {
			r.Signature = fmt.Sprintf("%c%s", r.Signature[0]^1, r.Signature[1:])
		},
	} {
		c := r
		c.BatchPath = append([]string{}, r.BatchPath...)
		change(&c)
		if err := receipt.Verify(c, e.pki.ca); err == nil {
			t.Errorf("%s changed: the receipt still verifies", name)
		}
	}
	if err := receipt.Verify(r, e.pki.ca); err != nil {
		t.Fatal(err)
	}
}

// TestReceiptHeader: an append's header value is its receipt document in
// base64url, with at most two spaces of padding before signed_at, and is
// empty without a signer.
func TestReceiptHeader(t *testing.T) {
	e := newEnv(t, Options{})
	for id, r := range appendConcurrently(t, e.log, 0, 16) {
		doc, err := base64.RawURLEncoding.DecodeString(r.Header())
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for range 2 {
			doc = bytes.Replace(doc, []byte(` ,"signed_at"`), []byte(`,"signed_at"`), 1)
		}
		if want := r.Signed().AppendJSON(nil); !bytes.Equal(doc, want) {
			t.Fatalf("%s: header value of\n%s\nnot of its receipt\n%s", id, doc, want)
		}
	}
	if h := (Receipt{}).Header(); h != "" {
		t.Fatalf("header value %q without a receipt", h)
	}
}

// TestReceiptAllocations guards what receipts cost each recorded request,
// as allocation counts (deterministic, unlike time): an append's header
// value is one allocation, the string itself; signing a batch of 32 claims
// makes one allocation per claim (its request id as a string) and a fixed
// number for the batch (the ECDSA signature's own ~65 among them), where
// hashing each claim and tree node on its own made ~8 per claim.
func TestReceiptAllocations(t *testing.T) {
	pki := newTestPKI(t, "app_allocs")
	l := &Log{opts: Options{ApplianceID: "app_allocs", Signer: pki.app, Now: func() time.Time { return day1 },
		Logger: slog.New(slog.DiscardHandler)}}
	l.w.day = "2026-03-01"
	const n = 32
	entries := make([]entry, n)
	times := make([]string, n)
	for i := range entries {
		lb := []byte(fmt.Sprintf(`{"leaf":%d}`, i))
		entries[i] = entry{tenant: "acme", requestID: []byte(fmt.Sprintf("req_a%012d", i)), seq: uint64(i + 1),
			leafIndex: uint64(i), leaf: lb, leafHash: leaf.Hash(lb)}
		times[i] = leaf.FormatTime(day1)
	}
	signed, _ := l.signBatch(entries, times)
	if signed == nil {
		t.Fatal("not signed")
	}
	_ = signed.headerOf(0) // the batch's members, encoded once
	for _, c := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"header value", 1, func() { _ = Receipt{signed: signed, index: 17}.Header() }},
		{"no header value", 0, func() { _ = Receipt{}.Header() }},
		{"signing a batch of 32", n + 100, func() { _, _ = l.signBatch(entries, times) }},
	} {
		if got := testing.AllocsPerRun(50, c.f); got > c.max {
			t.Errorf("%s: %v allocations, at most %v", c.name, got, c.max)
		} else {
			t.Logf("%s: %v allocations", c.name, got)
		}
	}
}
