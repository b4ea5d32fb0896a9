package vllm_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// countedServer is an httptest server that counts the connections it
// accepted.
type countedServer struct {
	*httptest.Server
	conns atomic.Int32
}

func startCounted(t *testing.T, h http.HandlerFunc) *countedServer {
	t.Helper()
	s := &countedServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// do sends a request through tr and returns the body read to its end.
func do(t *testing.T, tr http.RoundTripper, ctx context.Context, method, url, body string) (string, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	_, _ = fmt.Fprintf(w, "%s %s", r.Method, b)
}

// Consecutive requests, plain and chunked, are served by one connection,
// which is back in the pool after each body was read to its end.
func TestTransportKeepsAlive(t *testing.T) {
	srv := startCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			for i := range 3 {
				_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		echo(w, r)
	})
	tr := &vllm.Transport{}
	for i := range 4 {
		got, err := do(t, tr, t.Context(), http.MethodPost, srv.URL+"/echo", "hello")
		if err != nil || got != "POST hello" {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
		got, err = do(t, tr, t.Context(), http.MethodGet, srv.URL+"/chunked", "")
		if err != nil || got != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
			t.Fatalf("chunked %d: %q, %v", i, got, err)
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections for 8 requests, want 1", n)
	}
	if open, idle := vllm.PoolStats(tr, srv.URL); open != 1 || idle != 1 {
		t.Errorf("pool: %d open, %d idle; want 1 and 1", open, idle)
	}
	tr.CloseIdleConnections()
	if open, idle := vllm.PoolStats(tr, srv.URL); open != 0 || idle != 0 {
		t.Errorf("after CloseIdleConnections: %d open, %d idle", open, idle)
	}
}

// A connection the server closed while it was idle is not used: the next
// request, a POST, succeeds on a new one.
func TestTransportServerClosedIdle(t *testing.T) {
	srv := startCounted(t, echo)
	tr := &vllm.Transport{}
	for i := range 3 {
		if got, err := do(t, tr, t.Context(), http.MethodPost, srv.URL, "x"); err != nil || got != "POST x" {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
		srv.CloseClientConnections()
		// The FIN has to arrive before the next request looks: wait for
		// the server's side to be gone, as seen from ours.
		waitFor(t, func() bool { return srv.conns.Load() == int32(i+1) })
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}

// rawServer accepts connections and runs serve on each, for answers a
// well-behaved server would not give.
func rawServer(t *testing.T, serve func(n int, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(n, c) })
		}
	})
	return "http://" + ln.Addr().String()
}

// readRequest reads one request from br, its body included.
func readRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return true
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// A request that reached a reused connection which then ended without an
// answer is sent again only if it is replayable: a GET is, a POST (a
// completion, which the server may have started) is not.
func TestTransportRetryRule(t *testing.T) {
	for _, tc := range []struct {
		method   string
		succeeds bool
		sent     int32
	}{{http.MethodGet, true, 3}, {http.MethodPost, false, 2}} {
		t.Run(tc.method, func(t *testing.T) {
			// The first connection answers one request, then reads the
			// next and closes without an answer; later ones answer all.
			var requests atomic.Int32
			url := rawServer(t, func(n int, c net.Conn) {
				br := bufio.NewReader(c)
				for i := 0; readRequest(br); i++ {
					requests.Add(1)
					if n == 0 && i == 1 {
						return
					}
					_, _ = io.WriteString(c, okResponse)
				}
			})
			tr := &vllm.Transport{}
			t.Cleanup(tr.CloseIdleConnections) // before the server's cleanup
			if _, err := do(t, tr, t.Context(), tc.method, url, "a"); err != nil {
				t.Fatal(err)
			}
			_, err := do(t, tr, t.Context(), tc.method, url, "b")
			if (err == nil) != tc.succeeds {
				t.Errorf("second %s: %v, want success %v", tc.method, err, tc.succeeds)
			}
			if n := requests.Load(); n != tc.sent {
				t.Errorf("the server read %d requests, want %d", n, tc.sent)
			}
			want := 0
			if tc.succeeds {
				want = 1
			}
			if open, _ := vllm.PoolStats(tr, url); open != want {
				t.Errorf("%d connections open after the requests, want %d", open, want)
			}
		})
	}
}

// A response cut short, or not HTTP, fails its request and closes its
// connection.
func TestTransportBrokenResponse(t *testing.T) {
	for _, tc := range []struct{ name, answer string }{
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"},
		{"chunked cut", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nab"},
		{"not HTTP", "SSH-2.0-OpenSSH_9.6\r\n"},
		{"header cut", "HTTP/1.1 200 OK\r\nContent-Le"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, func(_ int, c net.Conn) {
				if readRequest(bufio.NewReader(c)) {
					_, _ = io.WriteString(c, tc.answer)
				}
			})
			tr := &vllm.Transport{}
			if got, err := do(t, tr, t.Context(), http.MethodPost, url, "x"); err == nil {
				t.Errorf("no error; read %q", got)
			}
			if open, idle := vllm.PoolStats(tr, url); open != 0 || idle != 0 {
				t.Errorf("%d open, %d idle after a broken response", open, idle)
			}
		})
	}
}

// Cancelling a request in the middle of its stream fails the body's read
// with the context's error, closes the connection (the server sees its
// request end) and leaves no goroutine behind.
func TestTransportCancelMidStream(t *testing.T) {
	serverSawEnd := make(chan struct{})
	srv := startCounted(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(serverSawEnd)
	})
	tr := &vllm.Transport{}
	before := numGoroutines()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	_, err = io.ReadAll(br)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", err)
	}
	_ = resp.Body.Close()
	<-serverSawEnd
	if open, idle := vllm.PoolStats(tr, srv.URL); open != 0 || idle != 0 {
		t.Errorf("%d open, %d idle after a cancelled stream", open, idle)
	}
	waitFor(t, func() bool { return numGoroutines() <= before })
}

// numGoroutines counts the goroutines, after letting finished ones go.
func numGoroutines() int {
	time.Sleep(10 * time.Millisecond)
	return runtime.NumGoroutine()
}

// A context that ends while its request waits for the server's answer
// interrupts it.
func TestTransportDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := startCounted(t, func(http.ResponseWriter, *http.Request) { <-release })
	defer close(release)
	tr := &vllm.Transport{}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := do(t, tr, ctx, http.MethodPost, srv.URL, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want context.DeadlineExceeded", err)
	}
	if open, _ := vllm.PoolStats(tr, srv.URL); open != 0 {
		t.Errorf("%d open after the deadline", open)
	}
}

// No more than MaxConnsPerServer connections are open at once: the
// requests beyond wait for one, and one whose context ends while waiting
// fails with its context's error.
func TestTransportPoolBound(t *testing.T) {
	const maxConns, requests = 2, 8
	var inHandler, most atomic.Int32
	release := make(chan struct{})
	srv := startCounted(t, func(w http.ResponseWriter, r *http.Request) {
		n := inHandler.Add(1)
		defer inHandler.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		echo(w, r)
	})
	tr := &vllm.Transport{MaxConnsPerServer: maxConns, MaxIdlePerServer: 1}
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Go(func() {
			got, err := do(t, tr, t.Context(), http.MethodPost, srv.URL, "x")
			if err == nil && got != "POST x" {
				err = fmt.Errorf("got %q", got)
			}
			errs <- err
		})
	}
	waitFor(t, func() bool { return inHandler.Load() == maxConns })
	// One more, whose context ends while it waits.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := do(t, tr, ctx, http.MethodPost, srv.URL, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting request: %v, want context.DeadlineExceeded", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := most.Load(); m > maxConns {
		t.Errorf("%d requests at the server at once, bound %d", m, maxConns)
	}
	if n := srv.conns.Load(); n > maxConns {
		t.Errorf("%d connections opened, bound %d", n, maxConns)
	}
	if open, idle := vllm.PoolStats(tr, srv.URL); open != 1 || idle != 1 {
		t.Errorf("after the requests: %d open, %d idle; want 1 and 1 (MaxIdlePerServer)", open, idle)
	}
}

// An https:// server is reached with the roots given, and refused
// without them; the engine's client keeps its connection across calls.
func TestTransportTLS(t *testing.T) {
	srv, caPEM := vllmfake.StartTLS(t)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA in the fake's PEM")
	}
	client := vllm.NewClient(roots)
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("a b c")}})
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := reply(t, evs); text != "a b c" {
			t.Errorf("reply %q", text)
		}
	}
	if open, idle := vllm.PoolStats(client.Transport.(*vllm.Transport), srv.URL); open != 1 || idle != 1 {
		t.Errorf("%d open, %d idle after four calls; want 1 and 1", open, idle)
	}
	other, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL, Client: vllm.NewClient(x509.NewCertPool())})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Refresh(t.Context()); err == nil {
		t.Error("a server whose CA is not among the roots was trusted")
	}
}

// The engine's default client is the Transport, and a completion's
// stream read to [DONE] gives its connection back.
func TestEngineTransportReuse(t *testing.T) {
	var dials atomic.Int32
	dialer := &net.Dialer{}
	tr := &vllm.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}}
	e, srv := newEngine(t, vllm.Config{Client: &http.Client{Transport: tr}})
	for _, whole := range []bool{false, true, false} {
		if _, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("a b c")}, WholeReply: whole}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for a model list and three completions, want 1", n)
	}
	// A caller that stops early: its stream's connection is closed, or,
	// if the whole stream was already read off it (the server was quick),
	// back in the pool; never left busy.
	stop := errors.New("client gone")
	err := e.ChatCompletion(t.Context(), &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("a b c d e f")}},
		func(*inferencev1.ChatCompletionResponse) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err %v", err)
	}
	if open, idle := vllm.PoolStats(tr, srv.URL); open != idle || open > 1 {
		t.Errorf("after a stream stopped early: %d open, %d idle", open, idle)
	}
}

// A model server may answer a request before reading its body (a 413 on
// its Content-Length, a 400 on its header) and close the connection,
// which fails the body's write: the caller gets that answer, as the
// engine maps the server's status, and not the write's error. A server
// that closes without a complete answer still fails the request as
// unreachable.
//
// The write fails every time, not by timing: the server never reads the
// body, whose 4 MiB exceed what the two sockets' buffers hold (the
// server's receive buffer and the client's send buffer are set to 64 KiB,
// which also turns off the kernel's growing of them), so the client is
// still writing when the server closes; closing with unread bytes resets
// the connection. The answer is sent, then the server's FIN, before that
// reset, and TCP delivers them in order, so the answer is on the client's
// socket when its write fails.
func TestTransportEarlyAnswer(t *testing.T) {
	const message = "the request body exceeds 1048576 bytes"
	answer := func(code int, reason string) string {
		body := fmt.Sprintf(`{"error":{"message":%q,"type":"BadRequestError","code":%d}}`, message, code)
		return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
			code, reason, len(body), body)
	}
	big := strings.Repeat("a", 4<<20)
	for _, tc := range []struct {
		name   string
		answer string // "": none
		status int    // the transport's answer; 0: an error
		code   codes.Code
		msg    string
	}{
		{"413", answer(http.StatusRequestEntityTooLarge, "Request Entity Too Large"), http.StatusRequestEntityTooLarge, codes.Internal, "413: " + message},
		{"400", answer(http.StatusBadRequest, "Bad Request"), http.StatusBadRequest, codes.InvalidArgument, message},
		{"answer cut", "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 100\r\n\r\n{\"error\"", 0, codes.Unavailable, "unreachable"},
		{"no answer", "", 0, codes.Unavailable, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wrote atomic.Int32 // early answers sent
			url := rawServer(t, func(_ int, c net.Conn) {
				_ = c.(*net.TCPConn).SetReadBuffer(smallSocketBuffer)
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if req.Method == http.MethodGet { // the engine's model list
						_, _ = io.Copy(io.Discard, req.Body)
						_, _ = io.WriteString(c, modelsResponse)
						continue
					}
					if tc.answer != "" {
						_, _ = io.WriteString(c, tc.answer)
						wrote.Add(1)
					}
					_ = c.(*net.TCPConn).CloseWrite()
					return // and close, the body unread: a reset
				}
			})
			tr := smallBufferTransport()
			t.Cleanup(tr.CloseIdleConnections)

			// The transport: the answer, its body whole, on a connection
			// that is then closed.
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(big))
			resp, err := tr.RoundTrip(req)
			switch {
			case tc.status == 0:
				if err == nil || !strings.Contains(err.Error(), "writing the request") {
					t.Errorf("err %v, want the write's", err)
				}
			case err != nil:
				t.Fatalf("err %v, want the server's %d", err, tc.status)
			default:
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != tc.status || err != nil || !strings.Contains(string(b), message) {
					t.Errorf("answer %d %q, %v; want %d with the server's message", resp.StatusCode, b, err, tc.status)
				}
			}
			if open, idle := vllm.PoolStats(tr, url); open != 0 || idle != 0 {
				t.Errorf("%d open, %d idle after the answer", open, idle)
			}

			// The engine: the status mapped as any other answer of the
			// server's, on a request that reused the model list's
			// connection (a POST: never sent again once written).
			e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: url, Client: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, err = collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user(big)}})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("completion: %v; want %v containing %q", err, tc.code, tc.msg)
			}
			if want := int32(2); tc.answer != "" && wrote.Load() != want {
				t.Errorf("the server answered %d requests early, want %d", wrote.Load(), want)
			}
		})
	}
}

// smallSocketBuffer is the socket buffer size of TestTransportEarlyAnswer.
const smallSocketBuffer = 64 << 10

// smallBufferTransport is a Transport whose connections have a send
// buffer of smallSocketBuffer.
func smallBufferTransport() *vllm.Transport {
	dialer := &net.Dialer{}
	return &vllm.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.(*net.TCPConn).SetWriteBuffer(smallSocketBuffer); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}}
}

// modelsResponse is a model server's list of one model, chatID.
var modelsResponse = func() string {
	body := `{"object":"list","data":[{"id":"` + chatID + `","object":"model","owned_by":"vllm"}]}`
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()
