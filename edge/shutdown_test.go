package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate/edge"
)

// entered closes ch when the first engine call starts.
func entered(ch chan<- struct{}) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		close(ch)
		return h(srv, ss)
	}
}

// A stream still running when the gateway's shutdown grace ends (its
// requests' base context cancelled with edge.ErrShuttingDown) ends with
// exactly one error event, 503 service_unavailable, and no [DONE]; its
// event is recorded with what was written. It is neither taken for a
// client that went away (499) nor logged as a failure.
func TestShutdownEndsStreamWithErrorEvent(t *testing.T) {
	base, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	release := make(chan struct{})
	defer close(release)
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, baseContext: base,
		interceptors: []grpc.StreamServerInterceptor{stallAfter(2, release)}})

	resp, err := s.client.Do(s.newRequest(t, http.MethodPost, chatPath, keyAll,
		`{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"hello big wide world"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	br := bufio.NewReader(io.TeeReader(resp.Body, &got))
	c := chunks{id: resp.Header.Get("x-request-id")}
	started := []string{
		c.chunk(`{"role":"assistant","content":""}`, "null"),
		c.chunk(`{"content":"hello "}`, "null"),
		c.chunk(`{"content":"big "}`, "null"),
	}
	for i, want := range started {
		if f, err := readFrame(br); err != nil || f != want {
			t.Fatalf("frame %d = %q (%v), want %q", i, f, err, want)
		}
	}
	// The engine is stalled before its third piece: the grace is over.
	stop(edge.ErrShuttingDown)
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	wantFrames(t, sseFrames(t, got.Bytes()), append(started,
		fmt.Sprintf(`data: {"error":{"code":"service_unavailable","message":"the gateway is shutting down; retry on another gateway or later","type":"server_error","request_id":"%s"}}`, c.id)))

	ev := audit.next(t)
	if ev.Status != http.StatusOK || ev.RequestID != c.id || !bytes.Equal(ev.ResponseBody, got.Bytes()) {
		t.Errorf("recorded status %d id %s body %q, want 200 %s %q", ev.Status, ev.RequestID, ev.ResponseBody, c.id, got.Bytes())
	}
	if w := s.logs.warnings(); len(w) > 0 {
		t.Errorf("the shutdown was logged as a failure: %q", w)
	}
}

// A request cut by the shutdown before anything was written, streamed or
// not, is 503 service_unavailable in the envelope, and recorded so.
func TestShutdownBeforeResponseIs503(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %t", stream), func(t *testing.T) {
			base, stop := context.WithCancelCause(context.Background())
			defer stop(nil)
			release := make(chan struct{})
			defer close(release)
			in := make(chan struct{})
			audit := newAuditRecorder()
			s := newStack(t, stackConfig{audit: audit, baseContext: base,
				interceptors: []grpc.StreamServerInterceptor{entered(in), stallAfter(0, release)}})
			req := s.newRequest(t, http.MethodPost, chatPath, keyAll,
				fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"hello"}]}`, stream))
			type result struct {
				r   response
				err error
			}
			rc := make(chan result, 1)
			go func() {
				resp, err := s.client.Do(req)
				if err != nil {
					rc <- result{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				rc <- result{response{status: resp.StatusCode, header: resp.Header, body: body}, err}
			}()
			<-in
			stop(edge.ErrShuttingDown)
			res := <-rc
			if res.err != nil {
				t.Fatal(res.err)
			}
			r := res.r
			wantError(t, r, http.StatusServiceUnavailable, "service_unavailable", "server_error", "")
			ev := audit.next(t)
			if ev.Status != http.StatusServiceUnavailable || !bytes.Equal(ev.ResponseBody, r.body) {
				t.Errorf("recorded status %d body %q, want 503 %q", ev.Status, ev.ResponseBody, r.body)
			}
			if w := s.logs.warnings(); len(w) > 0 {
				t.Errorf("the shutdown was logged as a failure: %q", w)
			}
		})
	}
}

// A client still sending its body when the grace ends gets 503 at once,
// recorded so: the shutdown cuts the body's read, which a cancelled
// context alone would not interrupt (the read would wait out
// BodyReadTimeout, and the connection be closed under it).
func TestShutdownDuringBodyReadIs503(t *testing.T) {
	base, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, baseContext: base})
	// The rest of the body never comes, and BodyReadTimeout is the
	// default minute.
	body := `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`
	conn := s.sendRaw(t, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		chatPath, s.host(), keyAll, len(body), body[:10]))
	stop(edge.ErrShuttingDown) // whether the handler is reading yet or not
	r := readRaw(t, conn, "while the body was being read")
	wantError(t, r, http.StatusServiceUnavailable, "service_unavailable", "server_error", "")
	if ev := audit.next(t); ev.Status != http.StatusServiceUnavailable || !bytes.Equal(ev.ResponseBody, r.body) {
		t.Errorf("recorded status %d body %q, want 503 %q", ev.Status, ev.ResponseBody, r.body)
	}
}

// Drained waits for the requests in flight, and gives up with its
// context: the appliance calls it after closing the gateway, so that the
// handlers that closing released record their events before the audit
// log closes.
func TestDrained(t *testing.T) {
	s := newStack(t, stackConfig{})
	if !s.edge.Drained(t.Context()) {
		t.Fatal("Drained with nothing in flight = false")
	}
	req := s.newRequest(t, http.MethodPost, chatPath, keyAll,
		`{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"/delay 100 one two three"}]}`)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if s.edge.InFlight() != 1 {
		t.Fatalf("%d in flight while the stream runs, want 1", s.edge.InFlight())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if s.edge.Drained(ctx) {
		t.Fatal("Drained = true with a stream in flight and its context ended")
	}
	if s.edge.InFlight() != 1 {
		t.Fatalf("a Drained that gave up left %d in flight, want the stream's 1", s.edge.InFlight())
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if !s.edge.Drained(t.Context()) {
		t.Fatal("Drained = false once the stream ended")
	}
	if s.edge.InFlight() != 0 {
		t.Fatalf("Drained kept %d slots", s.edge.InFlight())
	}
}
