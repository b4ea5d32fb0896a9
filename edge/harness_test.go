package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/edge"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/internal/h1server"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// The limits tests run a real limiter on an embedded etcd, started the
// first time a test asks for it.
func TestMain(m *testing.M) { etcdtest.Main(m) }

// fixedNow is the edge's clock, so `created` is known: 2026-01-01T00:00:00Z.
var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Virtual keys of the test stack.
const (
	keyAll   = "tgk_test_all"   // every model
	keyEcho  = "tgk_test_echo"  // builtin/echo only
	keyEmbed = "tgk_test_embed" // builtin/embed only
	keyNone  = "tgk_test_none"  // no model at all
	keyTPD   = "tgk_test_tpd"   // every model, 50 tokens a day
	keyTool  = "tgk_test_tool"  // every model, scope tool:get_weather
	keyDay   = "tgk_test_day"   // every model, a million tokens a day
)

// tpdLimit is keyTPD's tokens per day.
const tpdLimit = 50

// mapAuth is an Authenticator over fixed principals; any other secret is
// keys.ErrUnauthorized.
type mapAuth map[string]*keys.Principal

func (m mapAuth) Authenticate(secret string) (*keys.Principal, error) {
	if p, ok := m[secret]; ok {
		return p, nil
	}
	return nil, keys.ErrUnauthorized
}

func testAuth() mapAuth {
	key := func(id string, all bool, models ...string) *keys.Principal {
		return keys.NewPrincipal("ten_test", id, id, all, models, 0, 0, nil, time.Time{})
	}
	return mapAuth{
		keyAll:   key("key_all", true),
		keyEcho:  key("key_echo", false, builtin.EchoModel),
		keyEmbed: key("key_embed", false, builtin.EmbedModel),
		keyNone:  key("key_none", false),
		keyTPD:   keys.NewPrincipal("ten_test", "key_tpd", "key_tpd", true, nil, 0, tpdLimit, nil, time.Time{}),
		keyTool:  keys.NewPrincipal("ten_test", "key_tool", "key_tool", true, nil, 0, 0, []string{"tool:get_weather"}, time.Time{}),
		keyDay:   keys.NewPrincipal("ten_test", "key_day", "key_day", true, nil, 0, 1_000_000, nil, time.Time{}),
	}
}

// stackConfig varies the stack under test.
type stackConfig struct {
	// local calls the inference service in-process (inference.LocalClient,
	// as the appliance does) instead of over gRPC.
	local        bool
	maxBodyBytes int64
	maxInFlight  int
	// maxBodyBytesInFlight is the edge's MaxBodyBytesInFlight; 0 takes
	// the default.
	maxBodyBytesInFlight int64
	metrics              *edge.Metrics
	// interceptors wrap the gRPC server's stream handlers, innermost last.
	interceptors []grpc.StreamServerInterceptor
	// audit, policy and limits are the edge's optional steps; nil skips.
	audit *auditRecorder
	// auditLog, when set, is a real audit log recording every request and
	// serving its receipts (instead of audit).
	auditLog *auditlog.Log
	policy   pipeline.Decider
	limits   pipeline.Limiter
	// bodyReadTimeout is the edge's BodyReadTimeout; 0 takes the default.
	bodyReadTimeout time.Duration
	// baseContext, when set, is the HTTP server's BaseContext: the
	// context every request's descends from.
	baseContext context.Context
	// auth replaces testAuth's keys when set.
	auth pipeline.Authenticator
	// engines serve models besides the built-in ones.
	engines []inference.Engine
	// writeStall is the edge's WriteStallTimeout; 0 takes the default.
	writeStall time.Duration
	// sendBuffer, when set, is the socket send buffer of every
	// connection the server accepts, in bytes.
	sendBuffer int
	// connState, when set, is told of every change of state of the
	// server's connections.
	connState func(net.Conn, http.ConnState)
	// tracer, when set, is the pipeline's tracer.
	tracer trace.Tracer
}

// stack is the edge over the built-in engine, served by httptest.
type stack struct {
	edge   *edge.Server
	url    string
	client *http.Client
	logs   *logRecorder
}

func newStack(tb testing.TB, sc stackConfig) *stack {
	tb.Helper()
	svc, err := inference.NewService(append([]inference.Engine{builtin.New()}, sc.engines...)...)
	if err != nil {
		tb.Fatal(err)
	}
	var cli inferencev1.InferenceServiceClient
	if sc.local {
		local := inference.NewLocalClient(svc)
		cli = local
	} else {
		conn := grpctest.Serve(tb, func(r grpc.ServiceRegistrar) { inferencev1.RegisterInferenceServiceServer(r, svc) },
			grpc.ChainStreamInterceptor(sc.interceptors...))
		cli = inferencev1.NewInferenceServiceClient(conn)
	}
	logs := &logRecorder{}
	pcfg := pipeline.Config{
		Inference: cli,
		Auth:      testAuth(),
		Logger:    slog.New(logs),
		Now:       func() time.Time { return fixedNow },
		Policy:    sc.policy,
		Limits:    sc.limits,
		Responses: pipeline.NewMemoryResponseStore(time.Hour, 0),
		Tracer:    sc.tracer,
	}
	if sc.audit != nil {
		pcfg.Audit = sc.audit
	}
	if sc.auditLog != nil {
		pcfg.Audit, pcfg.Receipts = sc.auditLog, sc.auditLog
	}
	if sc.auth != nil {
		pcfg.Auth = sc.auth
	}
	srv := edge.New(edge.Config{
		Pipeline:             pipeline.New(pcfg),
		Logger:               slog.New(logs),
		MaxBodyBytes:         sc.maxBodyBytes,
		MaxInFlight:          sc.maxInFlight,
		MaxBodyBytesInFlight: sc.maxBodyBytesInFlight,
		Metrics:              sc.metrics,
		BodyReadTimeout:      sc.bodyReadTimeout,
		WriteStallTimeout:    sc.writeStall,
	})
	url, client := serve(tb, srv, sc)
	return &stack{edge: srv, url: url, client: client, logs: logs}
}

// serve serves h as the gateway does, by h1server, or by net/http's
// server when TOLLGATE_EDGE_SERVER=net/http (the edge must behave the
// same over both); it returns the server's URL and a client of it.
func serve(tb testing.TB, h http.Handler, sc stackConfig) (string, *http.Client) {
	if os.Getenv("TOLLGATE_EDGE_SERVER") == "net/http" {
		ts := httptest.NewUnstartedServer(h)
		if sc.baseContext != nil {
			ts.Config.BaseContext = func(net.Listener) context.Context { return sc.baseContext }
		}
		if sc.sendBuffer > 0 {
			ts.Listener = sendBufferListener{ts.Listener, sc.sendBuffer}
		}
		ts.Config.ConnState = sc.connState // httptest keeps it, and adds its own
		ts.Start()
		tb.Cleanup(ts.Close)
		return ts.URL, ts.Client()
	}
	var lis net.Listener
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if sc.sendBuffer > 0 {
		lis = sendBufferListener{lis, sc.sendBuffer}
	}
	if sc.connState != nil {
		lis = closedListener{lis, sc.connState}
	}
	srv := &h1server.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	if sc.baseContext != nil {
		srv.BaseContext = func(net.Listener) context.Context { return sc.baseContext }
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	client := &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(func() {
		client.CloseIdleConnections()
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("gateway server: %v", err)
		}
	})
	return "http://" + lis.Addr().String(), client
}

// closedListener tells connState of each accepted connection's close
// (http.StateClosed), the one state h1server has that tests await.
type closedListener struct {
	net.Listener
	connState func(net.Conn, http.ConnState)
}

func (l closedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &closedConn{Conn: c, connState: l.connState}, nil
}

type closedConn struct {
	net.Conn
	connState func(net.Conn, http.ConnState)
	once      sync.Once
}

func (c *closedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.connState(c.Conn, http.StateClosed) })
	return err
}

// sendBufferListener sets the socket send buffer of each connection it
// accepts.
type sendBufferListener struct {
	net.Listener
	bytes int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(l.bytes); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, err
}

// loadBundle writes a policy bundle of one rego file and loads it.
func loadBundle(t *testing.T, rego string) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		".manifest":             `{"revision":"test","roots":["tollgate"],"rego_version":1}`,
		"tollgate/gateway.rego": rego,
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := policy.Load(context.Background(), dir, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// auditRecorder is a pipeline.StreamRecorder that hands every event to the
// test, and then fails the append with fail when it is set (a failed log).
type auditRecorder struct {
	events chan auditlog.Event
	fail   error
	// startFail, when set, fails every stream's Start.
	startFail error
}

// Start implements pipeline.StreamRecorder.
func (a *auditRecorder) Start(context.Context, auditlog.StreamStart) error { return a.startFail }

func newAuditRecorder() *auditRecorder {
	return &auditRecorder{events: make(chan auditlog.Event, 16)}
}

func (a *auditRecorder) Append(_ context.Context, ev auditlog.Event) (auditlog.Receipt, error) {
	a.events <- ev
	return auditlog.Receipt{}, a.fail
}

// next waits for the next recorded event; the deadline only guards
// against a hang.
func (a *auditRecorder) next(t testing.TB) auditlog.Event {
	t.Helper()
	select {
	case ev := <-a.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no audit event was recorded")
		return auditlog.Event{}
	}
}

// logRecorder is a slog.Handler keeping what the edge logged at Warn or
// above.
type logRecorder struct {
	mu      sync.Mutex
	records []string
	ids     []string // the request_id of each record ("" without one)
}

func (l *logRecorder) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Level.String()+" "+r.Message)
	id := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "request_id" {
			id = a.Value.String()
			return false
		}
		return true
	})
	l.ids = append(l.ids, id)
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// warnings lists what was logged at Warn or above, as "LEVEL message".
func (l *logRecorder) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// requestIDs lists the request_id of each of warnings().
func (l *logRecorder) requestIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// eachTransport runs f against a stack over gRPC and one in-process.
func eachTransport(t *testing.T, sc stackConfig, f func(t *testing.T, s *stack)) {
	for _, local := range []bool{false, true} {
		name := "grpc"
		if local {
			name = "local"
		}
		t.Run(name, func(t *testing.T) {
			sc.local = local
			f(t, newStack(t, sc))
		})
	}
}

// response is a complete HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) id() string { return r.header.Get("x-request-id") }

// newRequest builds a request to the stack; key "" sends no Authorization.
func (s *stack) newRequest(t testing.TB, method, path, key, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

func (s *stack) send(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

func (s *stack) do(t testing.TB, method, path, key, body string) response {
	t.Helper()
	return s.send(t, s.newRequest(t, method, path, key, body))
}

func (s *stack) post(t testing.TB, path, key, body string) response {
	t.Helper()
	return s.do(t, http.MethodPost, path, key, body)
}

// wantOK fails unless r is a 200 JSON response, and returns its body.
func wantOK(t testing.TB, r response) []byte {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return r.body
}

// decodeMap decodes a JSON object, failing on anything else.
func decodeMap(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	return m
}

// sortedKeys lists an object's keys, for comparing key sets.
func sortedKeys(v any) []string {
	m, _ := v.(map[string]any)
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// wantKeys fails unless object v has exactly the keys want.
func wantKeys(t testing.TB, what string, v any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := sortedKeys(v); !slices.Equal(got, want) {
		t.Errorf("%s keys = %q, want %q", what, got, want)
	}
}

// wantError checks an error response: status, the envelope's exact key set,
// code, type and param ("" means absent), and request_id = x-request-id.
func wantError(t testing.TB, r response, status int, code, typ, param string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	env := decodeMap(t, r.body)
	wantKeys(t, "envelope", env, "error")
	e, _ := env["error"].(map[string]any)
	keys := []string{"code", "message", "type", "request_id"}
	if param != "" {
		keys = append(keys, "param")
	}
	if _, ok := e["policy_decision_id"]; ok {
		keys = append(keys, "policy_decision_id")
	}
	wantKeys(t, "error", e, keys...)
	if e["code"] != code || e["type"] != typ {
		t.Errorf("code/type = %v/%v, want %s/%s", e["code"], e["type"], code, typ)
	}
	if param != "" && e["param"] != param {
		t.Errorf("param = %v, want %s", e["param"], param)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty message")
	}
	if id := r.id(); !strings.HasPrefix(id, "req_") || e["request_id"] != id {
		t.Errorf("request_id %v, x-request-id %q", e["request_id"], id)
	}
	return e
}

// host is the stack's server address, host:port, for raw requests.
func (s *stack) host() string { return strings.TrimPrefix(s.url, "http://") }

// sendRaw opens a connection to the stack's server and writes request to
// it as it is: headers and as much of a body as the test wants sent. The
// connection's deadline guards against hanging; it is not a timing
// assertion. The connection is closed when the test ends.
func (s *stack) sendRaw(t *testing.T, request string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", s.host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readRaw reads the response to a raw request; what names the situation
// in the failure of a connection that never answers.
func readRaw(t *testing.T, conn net.Conn, what string) response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response %s: %v", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}
