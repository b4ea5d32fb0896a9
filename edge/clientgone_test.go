package edge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// blockingDecider is a policy that waits for the request to be cancelled,
// as an evaluation would that is still running when the client goes.
type blockingDecider struct{ entered chan struct{} }

func (d blockingDecider) Decide(ctx context.Context, _ policy.Input) (policy.Decision, error) {
	close(d.entered)
	<-ctx.Done()
	return policy.Decision{}, fmt.Errorf("policy: evaluating: %w", ctx.Err())
}

// blockingLimiter waits for the request to be cancelled, as Admit does
// while etcd does not answer, and then gives up as the limiter does.
type blockingLimiter struct{ entered chan struct{} }

func (l blockingLimiter) Admit(ctx context.Context, _ *keys.Principal, _ int64) (limits.Reservation, error) {
	close(l.entered)
	<-ctx.Done()
	return limits.Reservation{}, fmt.Errorf("%w: gave up waiting for a slice: %w", limits.ErrUnavailable, ctx.Err())
}

func (blockingLimiter) Peek(*keys.Principal) limits.State { return limits.State{} }

// A client that disconnects while its request waits on the policy, on the
// limits, or before its body has arrived is recorded with status 499 and
// no response, and its disconnect is not logged as a failure of the step.
func TestClientGoneBeforeResponse(t *testing.T) {
	const body = `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name string
		// setup returns the stack's config and a channel closed once the
		// request is inside the step; nil for the body case.
		setup func() (stackConfig, chan struct{})
	}{
		{"policy", func() (stackConfig, chan struct{}) {
			entered := make(chan struct{})
			return stackConfig{policy: blockingDecider{entered}}, entered
		}},
		{"limits", func() (stackConfig, chan struct{}) {
			entered := make(chan struct{})
			return stackConfig{limits: blockingLimiter{entered}}, entered
		}},
		{"body", func() (stackConfig, chan struct{}) { return stackConfig{}, nil }},
	} {
		for _, path := range []string{chatPath, embedPath} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				sc, entered := tc.setup()
				audit := newAuditRecorder()
				sc.audit = audit
				s := newStack(t, sc)
				req := body
				if path == embedPath {
					req = `{"model":"builtin/embed","input":"x"}`
				}
				if entered == nil {
					sendPartialBody(t, s, path, req)
				} else {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					errc := make(chan error, 1)
					go func() {
						resp, err := s.client.Do(s.newRequest(t, http.MethodPost, path, keyAll, req).WithContext(ctx))
						if err == nil {
							_ = resp.Body.Close()
							err = fmt.Errorf("got a response: %s", resp.Status)
						}
						errc <- err
					}()
					select {
					case <-entered:
					case err := <-errc:
						t.Fatalf("the request never reached the %s step: %v", tc.name, err)
					}
					cancel()
					if err := <-errc; !errors.Is(err, context.Canceled) {
						t.Errorf("the request ended with %v, want its cancellation", err)
					}
				}
				ev := audit.next(t)
				if ev.Status != 499 || ev.ResponseBody != nil || ev.Endpoint != path {
					t.Errorf("recorded %s status %d response %q, want %s 499 and none", ev.Endpoint, ev.Status, ev.ResponseBody, path)
				}
				if w := s.logs.warnings(); len(w) > 0 {
					t.Errorf("a client's disconnect was logged: %q", w)
				}
			})
		}
	}
}

// sendPartialBody sends the headers of a request for body and half of it,
// then closes the connection.
func sendPartialBody(t *testing.T, s *stack, path, body string) {
	t.Helper()
	conn := s.sendRaw(t, "POST "+path+" HTTP/1.1\r\nHost: "+s.host()+"\r\nAuthorization: Bearer "+keyAll+
		fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", len(body))+body[:len(body)/2])
	_ = conn.Close()
}

// A client that half-closes its connection once its request is sent is
// taken for one that went away (net/http cancels the request on the EOF):
// its event is recorded with 499, and it reads no response at all, never
// a 200 OK with an empty body that would contradict the record.
func TestHalfClosedClientGetsNoFakeResponse(t *testing.T) {
	const body = `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name  string
		setup func() (stackConfig, chan struct{})
	}{
		{"policy", func() (stackConfig, chan struct{}) {
			entered := make(chan struct{})
			return stackConfig{policy: blockingDecider{entered}}, entered
		}},
		{"limits", func() (stackConfig, chan struct{}) {
			entered := make(chan struct{})
			return stackConfig{limits: blockingLimiter{entered}}, entered
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, entered := tc.setup()
			audit := newAuditRecorder()
			sc.audit = audit
			s := newStack(t, sc)
			conn := s.sendRaw(t, "POST "+chatPath+" HTTP/1.1\r\nHost: "+s.host()+"\r\nAuthorization: Bearer "+keyAll+
				fmt.Sprintf("\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))+body)
			<-entered
			if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn)
			if len(got) > 0 {
				t.Errorf("a half-closed client read %q, want nothing", got)
			}
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("reading: %v", err)
			}
			if ev := audit.next(t); ev.Status != 499 || ev.ResponseBody != nil {
				t.Errorf("recorded status %d response %q, want 499 and none", ev.Status, ev.ResponseBody)
			}
		})
	}
}

// A stream whose client half-closes (or goes away) mid-reply is cut: the
// connection is aborted without the chunked body's last chunk, so a
// client still reading cannot take the stream for one that ended; its
// event holds what was written, with status 200.
func TestHalfClosedStreamIsCut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, interceptors: []grpc.StreamServerInterceptor{stallAfter(1, release)}})
	const body = `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"hello big world"}]}`
	conn := s.sendRaw(t, "POST "+chatPath+" HTTP/1.1\r\nHost: "+s.host()+"\r\nAuthorization: Bearer "+keyAll+
		fmt.Sprintf("\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))+body)
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(`"content":"hello "`)) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("the first piece never came: %v; read %q", err, got)
		}
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(conn)
	got = append(got, rest...)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading: %v", err)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || bytes.HasSuffix(got, []byte("\r\n0\r\n\r\n")) || bytes.Contains(got, []byte("[DONE]")) {
		t.Errorf("the cut stream reads as complete:\n%s", got)
	}
	if ev := audit.next(t); ev.Status != http.StatusOK || !bytes.Contains(ev.ResponseBody, []byte(`"content":"hello "`)) || bytes.Contains(ev.ResponseBody, []byte("[DONE]")) {
		t.Errorf("recorded status %d response %q, want 200 and the first piece", ev.Status, ev.ResponseBody)
	}
}
