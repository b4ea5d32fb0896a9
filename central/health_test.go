package central_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/rest"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestHealthRoutes: on a plane whose store answers, /healthz and /livez
// answer 200 {"status":"ok"} to GET and HEAD, without a token; any other
// method is 405 in the envelope with Allow.
func TestHealthRoutes(t *testing.T) {
	p := centraltest.StartPlane(t)
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, rest.HealthzPath, http.StatusOK, `{"status":"ok"}`},
		{http.MethodHead, rest.HealthzPath, http.StatusOK, ""},
		{http.MethodGet, rest.LivezPath, http.StatusOK, `{"status":"ok"}`},
		{http.MethodHead, rest.LivezPath, http.StatusOK, ""},
		{http.MethodPost, rest.HealthzPath, http.StatusMethodNotAllowed, ""},
		{http.MethodDelete, rest.LivezPath, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			status, header, body := webtest.Do(t, tc.method, p.BaseURL+tc.path, "")
			if status != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
			if header.Get(rest.RequestIDHeader) == "" {
				t.Error("no request id")
			}
			if tc.status == http.StatusMethodNotAllowed {
				if got := header.Get("Allow"); got != "GET, HEAD" {
					t.Errorf("Allow %q, want GET, HEAD", got)
				}
				checkEnvelope(t, header, body, "method_not_allowed")
				return
			}
			if string(body) != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
		})
	}
}

// TestHealthFollowsPostgres: a replica on PostgreSQL is ready while the
// database answers through its connection; once every connection to it
// is ended and new ones are refused, or new ones open but the database
// never answers (the check's timeout then decides), /healthz answers 503
// service_unavailable in the envelope, saying nothing of the cause, while
// /livez still answers 200; when the database answers again, so does
// /healthz, without a restart.
func TestHealthFollowsPostgres(t *testing.T) {
	for _, down := range []proxyMode{proxyRefuse, proxyStall} {
		t.Run(down.String(), func(t *testing.T) {
			px := startPGProxy(t)
			st, err := pgstore.Open(context.Background(), px.dsn(t), pgstore.Options{Schema: pgtest.Schema(t, "central_test"), MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			p := centraltest.StartPlaneWith(t, func(c *central.Config) {
				c.Store = st
				c.HealthTimeout = 200 * time.Millisecond
			})
			if status, _, body := webtest.Get(t, p.BaseURL+rest.HealthzPath, ""); status != http.StatusOK {
				t.Fatalf("/healthz while PostgreSQL answers: %d %s", status, body)
			}

			px.set(down)
			hdr, body := waitHealth(t, p.BaseURL, http.StatusServiceUnavailable)
			checkEnvelope(t, hdr, body, "service_unavailable")
			if strings.Contains(string(body), "127.0.0.1") || !strings.Contains(string(body), "the store did not answer") {
				t.Errorf("503 body %s: want the cause said without addresses", body)
			}
			if status, _, body := webtest.Get(t, p.BaseURL+rest.LivezPath, ""); status != http.StatusOK {
				t.Errorf("/livez while PostgreSQL is down: %d %s", status, body)
			}

			px.set(proxyForward)
			waitHealth(t, p.BaseURL, http.StatusOK)
		})
	}
}

// TestHealthDuringShutdown: once a stop begins, /healthz answers 503
// although PostgreSQL answers, while the REST API and /livez still serve
// (the drain a balancer needs), until the listeners close.
func TestHealthDuringShutdown(t *testing.T) {
	st, err := pgstore.Open(context.Background(), pgtest.DSN(), pgstore.Options{Schema: pgtest.Schema(t, "central_test"), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	type answer struct {
		status int
		hdr    http.Header
		body   []byte
	}
	var mu sync.Mutex
	during := map[string]answer{}
	var p *centraltest.Plane
	p = centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.Store = st
		c.ShutdownDrain = 10 * time.Millisecond
		c.OnDrain = func() {
			for _, path := range []string{rest.HealthzPath, rest.LivezPath, rest.OpenAPIPath} {
				status, hdr, body := webtest.Get(t, p.BaseURL+path, "")
				mu.Lock()
				during[path] = answer{status, hdr, body}
				mu.Unlock()
			}
		}
	})
	if status, _, body := webtest.Get(t, p.BaseURL+rest.HealthzPath, ""); status != http.StatusOK {
		t.Fatalf("/healthz before the stop: %d %s", status, body)
	}
	if err := p.Stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(during) != 3 {
		t.Fatalf("the drain hook ran %d requests, want 3", len(during))
	}
	h := during[rest.HealthzPath]
	if h.status != http.StatusServiceUnavailable {
		t.Fatalf("/healthz while stopping: %d %s, want 503", h.status, h.body)
	}
	checkEnvelope(t, h.hdr, h.body, "service_unavailable")
	if !strings.Contains(string(h.body), "stopping") {
		t.Errorf("/healthz while stopping: %s, want the stop named", h.body)
	}
	for _, path := range []string{rest.LivezPath, rest.OpenAPIPath} {
		if a := during[path]; a.status != http.StatusOK {
			t.Errorf("%s while draining: %d %s, want 200", path, a.status, a.body)
		}
	}
	if resp, err := http.Get(p.BaseURL + rest.HealthzPath); err == nil {
		_ = resp.Body.Close()
		t.Error("/healthz answered after the plane stopped")
	}
}

// checkEnvelope checks an error answer: the spec's envelope, with code
// and the request id of the X-Request-Id header.
func checkEnvelope(t *testing.T, hdr http.Header, body []byte, code string) {
	t.Helper()
	var env envelopeOf
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not the envelope: %s (%v)", body, err)
	}
	if env.Error.Code != code || env.Error.Message == "" || env.Error.Type == "" ||
		env.Error.RequestID == "" || env.Error.RequestID != hdr.Get(rest.RequestIDHeader) {
		t.Errorf("envelope %s (X-Request-Id %q), want code %s with a message, type and the request id", body, hdr.Get(rest.RequestIDHeader), code)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// waitHealth polls /healthz until it answers want: a check's result is
// reused for a moment, so a change shows at the next check, not the next
// request. The bound is a hang guard, not a timing assertion.
func waitHealth(t *testing.T, base string, want int) (http.Header, []byte) {
	t.Helper()
	var status int
	var hdr http.Header
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, hdr, body = webtest.Get(t, base+rest.HealthzPath, ""); status == want {
			return hdr, body
		}
	}
	t.Fatalf("/healthz still %d %s after 30 s, want %d", status, body, want)
	return nil, nil
}

// proxyMode is what pgProxy does with connections.
type proxyMode int

const (
	// proxyForward passes connections to PostgreSQL.
	proxyForward proxyMode = iota
	// proxyRefuse closes each connection as soon as it is accepted: a
	// database that is down.
	proxyRefuse
	// proxyStall accepts connections and never answers: a database
	// that hangs, or a network that drops packets.
	proxyStall
)

func (m proxyMode) String() string {
	return [...]string{"forward", "refuse", "stall"}[m]
}

// pgProxy is a TCP proxy in front of the test PostgreSQL that a test
// switches between forwarding, refusing and stalling; each switch ends
// every connection it holds.
type pgProxy struct {
	lis    net.Listener
	target string

	mu    sync.Mutex
	mode  proxyMode
	conns map[net.Conn]struct{}
}

func startPGProxy(t *testing.T) *pgProxy {
	t.Helper()
	pgtest.Require(t)
	cfg, err := pgx.ParseConfig(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &pgProxy{lis: lis, target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { px.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		px.set(proxyRefuse)
		wg.Wait()
	})
	return px
}

// dsn is the test PostgreSQL's connection string through the proxy.
func (px *pgProxy) dsn(t *testing.T) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(px.lis.Addr().String())
	dsn := pgtest.DSN()
	if !strings.Contains(dsn, "://") {
		return dsn + " host=" + host + " port=" + port
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = px.lis.Addr().String()
	return u.String()
}

// set switches the mode and ends every connection held.
func (px *pgProxy) set(m proxyMode) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.mode = m
	for c := range px.conns {
		_ = c.Close()
		delete(px.conns, c)
	}
}

// track holds c until the next switch; false when c is to be closed now.
func (px *pgProxy) track(c net.Conn) (proxyMode, bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.mode == proxyRefuse {
		return px.mode, false
	}
	px.conns[c] = struct{}{}
	return px.mode, true
}

func (px *pgProxy) serve(c net.Conn) {
	mode, ok := px.track(c)
	if !ok {
		_ = c.Close()
		return
	}
	if mode == proxyStall {
		_, _ = io.Copy(io.Discard, c) // until the switch closes it
		return
	}
	up, err := net.Dial("tcp", px.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if _, ok := px.track(up); !ok {
		_ = up.Close()
		_ = c.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.Close()
		close(done)
	}()
	_, _ = io.Copy(c, up) // until the switch, or the database, closes one
	_ = c.Close()
	<-done
}
