package responsestore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/server/pipeline"
	"github.com/tollgate-dev/tollgate/server/responsestore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func openStore(t testing.TB, path string, maxBytes int64) *responsestore.Store {
	t.Helper()
	s, err := responsestore.Open(path, responsestore.Options{TTL: time.Hour, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func response(body string, texts ...string) pipeline.StoredResponse {
	r := pipeline.StoredResponse{Body: []byte(body)}
	for i, s := range texts {
		role := inferencev1.Role_ROLE_USER
		if i%2 == 1 {
			role = inferencev1.Role_ROLE_ASSISTANT
		}
		r.History = append(r.History, &inferencev1.Message{Role: role, Content: &inferencev1.Message_Text{Text: s}})
	}
	return r
}

func mustGet(t *testing.T, s *responsestore.Store, tenant, id string, now time.Time, want pipeline.StoredResponse) {
	t.Helper()
	got, ok, err := s.Get(tenant, id, now)
	if err != nil || !ok {
		t.Fatalf("get %s/%s: ok %v, err %v", tenant, id, ok, err)
	}
	if !bytes.Equal(got.Body, want.Body) || len(got.History) != len(want.History) {
		t.Fatalf("get %s/%s: %q with %d messages, want %q with %d", tenant, id, got.Body, len(got.History), want.Body, len(want.History))
	}
	for i := range want.History {
		if !proto.Equal(got.History[i], want.History[i]) {
			t.Fatalf("get %s/%s: message %d is %v, want %v", tenant, id, i, got.History[i], want.History[i])
		}
	}
}

func mustMiss(t *testing.T, s *responsestore.Store, tenant, id string, now time.Time) {
	t.Helper()
	if _, ok, err := s.Get(tenant, id, now); err != nil || ok {
		t.Fatalf("get %s/%s: ok %v, err %v; want not found", tenant, id, ok, err)
	}
}

func TestPutGetDeleteAndTenants(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), responsestore.FileName), 0)
	r := response(`{"id":"resp_1"}`, "hello", "hi there", "and then?")
	if err := s.Put("ten_a", "resp_1", r, t0); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "ten_a", "resp_1", t0, r)
	mustMiss(t, s, "ten_b", "resp_1", t0)
	mustMiss(t, s, "ten_a", "resp_2", t0)
	// An id that is a prefix of another, or a tenant that is, is not it.
	mustMiss(t, s, "ten_", "aresp_1", t0)
	if ok, err := s.Delete("ten_b", "resp_1", t0); err != nil || ok {
		t.Fatalf("another tenant's delete: ok %v, err %v", ok, err)
	}
	mustGet(t, s, "ten_a", "resp_1", t0, r)

	// Put again replaces, and counts the new size only.
	r2 := response(`{"id":"resp_1","v":2}`, "hello")
	if err := s.Put("ten_a", "resp_1", r2, t0); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "ten_a", "resp_1", t0, r2)
	if st, err := s.Stats(); err != nil || st.Responses != 1 || st.Bytes != pipeline.ResponseSize(r2) {
		t.Fatalf("stats %+v (err %v), want 1 response of %d bytes", st, err, pipeline.ResponseSize(r2))
	}

	if ok, err := s.Delete("ten_a", "resp_1", t0); err != nil || !ok {
		t.Fatalf("delete: ok %v, err %v", ok, err)
	}
	mustMiss(t, s, "ten_a", "resp_1", t0)
	if ok, err := s.Delete("ten_a", "resp_1", t0); err != nil || ok {
		t.Fatalf("second delete: ok %v, err %v", ok, err)
	}
	if st, err := s.Stats(); err != nil || st != (responsestore.Stats{}) {
		t.Fatalf("stats after delete %+v (err %v), want empty", st, err)
	}
}

func TestEvictionByBytes(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), responsestore.FileName), 100)
	body := func(n int) pipeline.StoredResponse {
		return pipeline.StoredResponse{Body: bytes.Repeat([]byte("x"), n)}
	}
	for i, n := range []int{40, 40} {
		if err := s.Put("ten_a", fmt.Sprint("resp_", i), body(n), t0); err != nil {
			t.Fatal(err)
		}
	}
	// 40+40+40 is over 100: the oldest goes, whatever its tenant.
	if err := s.Put("ten_b", "resp_2", body(40), t0); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, s, "ten_a", "resp_0", t0)
	mustGet(t, s, "ten_a", "resp_1", t0, body(40))
	mustGet(t, s, "ten_b", "resp_2", t0, body(40))
	// A response alone over the bound is not kept, and drops nothing.
	if err := s.Put("ten_a", "resp_3", body(101), t0); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, s, "ten_a", "resp_3", t0)
	mustGet(t, s, "ten_a", "resp_1", t0, body(40))
	// One that needs the room of two drops both oldest.
	if err := s.Put("ten_a", "resp_4", body(100), t0); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, s, "ten_a", "resp_1", t0)
	mustMiss(t, s, "ten_b", "resp_2", t0)
	mustGet(t, s, "ten_a", "resp_4", t0, body(100))
	if st, err := s.Stats(); err != nil || st.Responses != 1 || st.Bytes != 100 {
		t.Fatalf("stats %+v (err %v), want 1 response of 100 bytes", st, err)
	}
}

func TestExpiryAndSweep(t *testing.T) {
	clock := clocktest.New(t0)
	s := openStore(t, filepath.Join(t.TempDir(), responsestore.FileName), 0)
	r := response(`{}`, "q", "a")
	if err := s.Put("ten_a", "resp_old", r, clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute)
	if err := s.Put("ten_a", "resp_new", r, clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30*time.Minute - time.Nanosecond)
	mustGet(t, s, "ten_a", "resp_old", clock.Now(), r)
	if n, err := s.Sweep(clock.Now()); err != nil || n != 0 {
		t.Fatalf("sweep before expiry removed %d (err %v)", n, err)
	}
	clock.Advance(time.Nanosecond) // resp_old is an hour old
	mustMiss(t, s, "ten_a", "resp_old", clock.Now())
	if ok, err := s.Delete("ten_a", "resp_old", clock.Now()); err != nil || ok {
		t.Fatalf("delete of an expired response: ok %v, err %v", ok, err)
	}
	if err := s.Put("ten_a", "resp_x", r, clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // resp_new and resp_x expired, unswept
	if st, err := s.Stats(); err != nil || st.Responses != 2 {
		t.Fatalf("stats %+v (err %v), want the 2 expired responses still in the file", st, err)
	}
	if n, err := s.Sweep(clock.Now()); err != nil || n != 2 {
		t.Fatalf("sweep removed %d (err %v), want 2", n, err)
	}
	if st, err := s.Stats(); err != nil || st != (responsestore.Stats{}) {
		t.Fatalf("stats after the sweep %+v (err %v), want empty", st, err)
	}
}

func TestReopenKeepsEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), responsestore.FileName)
	s, err := responsestore.Open(path, responsestore.Options{TTL: time.Hour, MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	r := response(`{"id":"resp_1"}`, "hello", "hi")
	for _, id := range []string{"resp_1", "resp_2"} {
		if err := s.Put("ten_a", id, r, t0); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Delete("ten_a", "resp_2", t0); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path, 100)
	mustGet(t, s, "ten_a", "resp_1", t0, r)
	mustMiss(t, s, "ten_a", "resp_2", t0)
	// The order and the byte count came back too: the next put past the
	// bound evicts the response stored before the restart.
	big := pipeline.StoredResponse{Body: bytes.Repeat([]byte("y"), int(100-pipeline.ResponseSize(r)+1))}
	if err := s.Put("ten_a", "resp_3", big, t0); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, s, "ten_a", "resp_1", t0)
	mustGet(t, s, "ten_a", "resp_3", t0, big)
}

func TestOpenRefusesBadOptionsAndAForeignFile(t *testing.T) {
	if _, err := responsestore.Open(filepath.Join(t.TempDir(), responsestore.FileName), responsestore.Options{}); err == nil {
		t.Error("opened without a TTL")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, responsestore.FileName), []byte("not a bbolt file, but long enough to be read as one's pages?"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := responsestore.Open(filepath.Join(dir, responsestore.FileName), responsestore.Options{TTL: time.Hour}); err == nil {
		t.Error("opened a file that is not a store")
	}
}

// BenchmarkPut is the cost of storing one response (store: true): one
// bbolt transaction, two fsyncs. The body and history are those of a
// short exchange.
func BenchmarkPut(b *testing.B) {
	s := openStore(b, filepath.Join(b.TempDir(), responsestore.FileName), 0)
	r := response(string(bytes.Repeat([]byte("b"), 2048)), string(bytes.Repeat([]byte("q"), 512)), string(bytes.Repeat([]byte("a"), 1024)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Put("ten_a", fmt.Sprint("resp_", i), r, t0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGet is the cost of reading one back (GET, previous_response_id).
func BenchmarkGet(b *testing.B) {
	s := openStore(b, filepath.Join(b.TempDir(), responsestore.FileName), 0)
	r := response(string(bytes.Repeat([]byte("b"), 2048)), string(bytes.Repeat([]byte("q"), 512)), string(bytes.Repeat([]byte("a"), 1024)))
	if err := s.Put("ten_a", "resp_1", r, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.Get("ten_a", "resp_1", t0); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
