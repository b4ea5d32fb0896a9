package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// notifyBuffer is a buffer safe for concurrent use that signals every
// write on its channel, so a test can wait for output instead of polling
// for it.
type notifyBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan<- struct{}
}

func (n *notifyBuffer) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case n.changed <- struct{}{}:
	default: // a signal is pending already
	}
	return n.b.Write(p)
}

func (n *notifyBuffer) String() string { n.mu.Lock(); defer n.mu.Unlock(); return n.b.String() }

// outputs is what the commands of a test print, with one channel that
// signals any write.
type outputs struct {
	changed chan struct{}
	bufs    []*notifyBuffer
}

func newOutputs() *outputs { return &outputs{changed: make(chan struct{}, 1)} }

func (o *outputs) buffer() *notifyBuffer {
	b := &notifyBuffer{changed: o.changed}
	o.bufs = append(o.bufs, b)
	return b
}

// waitFor waits until cond holds, checking it at first and after every
// write of a command, for at most a minute.
func (o *outputs) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-o.changed:
		case <-deadline:
			var all strings.Builder
			for _, b := range o.bufs {
				all.WriteString(b.String())
			}
			t.Fatalf("%s: not after a minute; output:\n%s", what, all.String())
		}
	}
}

// pollFor waits until cond holds, asking it every few milliseconds, for
// what changes without a word in the output.
func pollFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not after a minute", what)
		}
	}
}

// runningCommand is a tollgate command running until the test ends.
type runningCommand struct {
	o           *outputs
	out, errOut *notifyBuffer
	done        chan int
}

func startCommand(t *testing.T, o *outputs, args ...string) *runningCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &runningCommand{o: o, out: o.buffer(), errOut: o.buffer(), done: make(chan int, 1)}
	go func() { c.done <- run(ctx, args, c.out, c.errOut) }()
	t.Cleanup(func() {
		cancel()
		if code := <-c.done; code != 0 {
			t.Errorf("tollgate %s exited %d: %s", args[0], code, c.errOut.String())
		}
	})
	return c
}

// match waits for re in the command's standard output and returns its
// first group.
func (c *runningCommand) match(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	c.o.waitFor(t, "output "+re, func() bool {
		select {
		case code := <-c.done:
			c.done <- code // for the cleanup, which waits for it
			t.Fatalf("exited %d: %s%s", code, c.out.String(), c.errOut.String())
		default:
		}
		m = rx.FindStringSubmatch(c.out.String())
		return m != nil
	})
	return m[1]
}

// httpGet is webtest.Get without the headers.
func httpGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	code, _, body := webtest.Get(t, url, token)
	return code, body
}

// TestCentralWithGateway runs `tollgate central` alone, on each store, and
// a separate `tollgate gateway` publishing to it with --central-ingest, as
// a fleet does: a request through the gateway becomes a head and a proof
// at the central plane that verify against the fleet CA, and the gateway's
// /metrics reports the forwarder's backlog.
func TestCentralWithGateway(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testCentralWithGateway(t, "app_cmdbolt", fleet.DefaultKeyKind, "--store", "bolt") })
	// An appliance issued before Ed25519 keys still uploads over mTLS and
	// its heads still verify.
	t.Run("bolt ecdsa-p256", func(t *testing.T) {
		testCentralWithGateway(t, "app_cmdboltec", fleet.ECDSAP256, "--store", "bolt")
	})
	t.Run("postgres", func(t *testing.T) {
		dsn, schema := postgresSchema(t)
		testCentralWithGateway(t, "app_cmdpg", fleet.DefaultKeyKind, "--store", "postgres", "--postgres", dsn, "--postgres-schema", schema)
	})
}

// issueAppliance makes a fleet CA in dir/pki and an appliance certificate
// of it in dir/appliance, with tollgate fleet (issueArgs added to `fleet
// issue`), and returns the two directories.
func issueAppliance(t *testing.T, dir, applianceID string, issueArgs ...string) (pki, appDir string) {
	t.Helper()
	pki, appDir = filepath.Join(dir, "pki"), filepath.Join(dir, "appliance")
	for _, args := range [][]string{
		{"fleet", "init-ca", "--dir", pki},
		append(append([]string{"fleet", "issue", "--appliance", applianceID, "--ca-dir", pki}, issueArgs...), "--out", appDir),
	} {
		_ = os.MkdirAll(args[len(args)-1], 0o700)
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("tollgate %v: %d %s", args, code, errOut.String())
		}
	}
	return pki, appDir
}

func testCentralWithGateway(t *testing.T, applianceID string, kind fleet.KeyKind, storeArgs ...string) {
	dir := t.TempDir()
	pki, appDir := issueAppliance(t, dir, applianceID, "--key", string(kind))
	centralDir := filepath.Join(dir, "central")
	const token = "tga_cmd_test_acme"
	tokens := filepath.Join(dir, "audit-tokens.yaml")
	if err := os.WriteFile(tokens, []byte("acme: [\""+token+"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(pki, fleet.CACertFile)

	o := newOutputs()
	c := startCommand(t, o, append([]string{"central", "--fleet-ca", ca, "--audit-tokens", tokens, "--data", centralDir,
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--log-level", "debug"}, storeArgs...)...)
	rest := c.match(t, `REST:\s+(http://[^/\s]+)/v1/`)
	centralMetrics := c.match(t, `Metrics:\s+http://(\S+)/metrics`)
	ingest := c.match(t, `Ingest:\s+(\S+) \(mTLS`)
	trust := c.match(t, `appliances trust (\S+)\)`)
	if st, _ := httpGet(t, rest+"/v1/openapi.json", ""); st != http.StatusOK {
		t.Fatalf("openapi.json: %d", st)
	}
	// The balancer's check, without a token: the store answers.
	if st, body := httpGet(t, rest+"/healthz", ""); st != http.StatusOK {
		t.Fatalf("/healthz: %d %s", st, body)
	}

	endpoints := etcdtest.Endpoints(t)
	// The gateway reads keys at etcd's root, shared by every run of the
	// test binary (-count): a label of this run only.
	secret := createKey(t, endpoints, fmt.Sprintf("%s-%d", applianceID, time.Now().UnixNano()))
	g := startCommand(t, o, "gateway", "--etcd-endpoints", strings.Join(endpoints, ","), "--data", appDir,
		"--policy", "../../examples/policy", "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--head-interval", "100ms", "--metrics-addr", "127.0.0.1:0", "--log-level", "debug",
		"--central-ingest", ingest, "--central-ca", trust)
	base := g.match(t, `Base URL:\s+(http://\S+)/v1`)
	grpcAddr := g.match(t, `gRPC:\s+(\S+)`)
	metrics := g.match(t, `Metrics:\s+http://(\S+)/metrics`)
	if central := g.match(t, `Central:\s+(\S+)`); central != ingest {
		t.Fatalf("gateway banner names central %s, want %s", central, ingest)
	}

	requestID := webtest.Chat(t, base, secret, "hello")
	// An internal service's call over gRPC is a leaf of the same tree,
	// with a proof of its own.
	grpcRequestID := grpcChat(t, grpcAddr, secret, "hello over gRPC")

	// The head reaches the central plane: checked after every log line of
	// the central plane or the gateway (the central plane logs each head it
	// stores at debug level).
	day := ids.Day(time.Now())
	var heads []byte
	o.waitFor(t, "a head of the request at the central plane", func() bool {
		var st int
		st, heads = httpGet(t, rest+"/v1/tenants/acme/audit/heads?day="+day, token)
		return st == http.StatusOK && bytes.Contains(heads, []byte(`"event_count":2,`))
	})
	caCert, err := verify.LoadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify.HeadsDocument(heads, caCert); err != nil {
		t.Fatalf("heads %s: %v", heads, err)
	}
	st, proof := httpGet(t, fmt.Sprintf("%s/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", rest, applianceID, day, requestID), token)
	if st != http.StatusOK {
		t.Fatalf("proof: %d %s", st, proof)
	}
	if _, err := verify.ProofDocument(proof, caCert, nil); err != nil {
		t.Fatalf("proof %s: %v", proof, err)
	}
	st, proof = httpGet(t, fmt.Sprintf("%s/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", rest, applianceID, day, grpcRequestID), token)
	if st != http.StatusOK {
		t.Fatalf("proof of the gRPC call: %d %s", st, proof)
	}
	if _, err := verify.ProofDocument(proof, caCert, nil); err != nil {
		t.Fatalf("proof of the gRPC call %s: %v", proof, err)
	}

	// The plane serves the head as soon as it stored it; the forwarder
	// empties its backlog once the plane's answer reaches it, a moment
	// later, with nothing printed: the metrics are polled.
	for _, want := range []string{"tollgate_central_forward_backlog_heads 0", `tollgate_central_forward_heads_total{outcome="stored"}`} {
		pollFor(t, "metrics with "+want, func() bool {
			st, body := httpGet(t, "http://"+metrics+"/metrics", "")
			return st == http.StatusOK && bytes.Contains(body, []byte(want))
		})
	}
	// The central plane's own /metrics counts the heads it stored, the
	// request's leaf, and the REST queries above.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\ntollgate_central_ingest_uploads_total\{outcome="stored"\} [1-9]`),
		regexp.MustCompile(`\ntollgate_central_ingest_leaves_total [1-9]`),
		regexp.MustCompile(`\ntollgate_central_rest_requests_total\{code="200",route="proof"\} 2\n`), // the HTTP and the gRPC call
	} {
		pollFor(t, "central metrics with "+want.String(), func() bool {
			st, body := httpGet(t, "http://"+centralMetrics+"/metrics", "")
			return st == http.StatusOK && want.Match(body)
		})
	}
}

// grpcChat streams a chat completion from the gateway's gRPC
// InferenceService under secret, and returns the call's request id.
func grpcChat(t *testing.T, addr, secret, text string) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+secret)
	var header metadata.MD
	stream, err := inferencev1.NewInferenceServiceClient(conn).ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{
		Model: "builtin/echo", Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}}},
	}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("gRPC chat: %v", err)
		}
	}
	id := header.Get("x-request-id")
	if len(id) != 1 {
		t.Fatalf("gRPC header metadata %v has no x-request-id", header)
	}
	return id[0]
}

// createKey creates a key of tenant acme in the etcd the gateway uses and
// returns its secret.
func createKey(t *testing.T, endpoints []string, label string) string {
	t.Helper()
	cli := etcdtest.ClientAt(t, endpoints, "")
	_, secret, err := keys.NewStore(cli, nil).Create(context.Background(), keys.Spec{TenantID: "acme", Label: label, AllModels: true})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestCentralFlags: the central plane and the gateway refuse incomplete
// flags before starting anything.
func TestCentralFlags(t *testing.T) {
	dir := t.TempDir()
	gw := []string{"gateway", "--etcd-endpoints", "127.0.0.1:1", "--data", dir, "--policy", "../../examples/policy"}
	// Flags missing or not going together are usage errors (2), which no
	// restart fixes; a file that cannot be read is an error (1).
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"central", "--data", dir}, 2, "--fleet-ca is required"},
		{[]string{"central", "--data", dir, "--log-level", "bogus"}, 2, "--log-level"},
		{[]string{"central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", dir, "--rest-tls-key", "key.pem"}, 2, "go together"},
		{[]string{"central", "--fleet-ca", filepath.Join(dir, "none.pem"), "--data", dir}, 1, "none.pem"},
		{[]string{"central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", dir, "--store", "mongo"}, 2, "want bolt or postgres"},
		{[]string{"central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", dir, "--store", "postgres"}, 2, "--store postgres needs --postgres"},
		{[]string{"central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", dir, "--ingest-max-pending-leaves", "1000"},
			2, "1000 pending leaves cannot hold an upload of 4194304 leaves"},
		{append(gw, "--central-ingest", "127.0.0.1:8091"), 2, "--central-ingest needs --central-ca"},
		{append(gw, "--central-ca", "ca.pem"), 2, "need --central-ingest"},
		{append(gw, "--central-ingest", "central.example", "--central-ca", "ca.pem"), 2, "--central-ingest: address central.example: missing port"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// postgresSchema returns the test PostgreSQL and a schema name dropped
// when the test ends (internal/pgtest).
func postgresSchema(t *testing.T) (dsn, schema string) {
	t.Helper()
	return pgtest.DSN(), pgtest.Schema(t, "central_cmd_test")
}

// TestDevAudit follows the audit part of the `tollgate dev` banner as a
// newcomer would: a request with the demo key, then the printed heads and
// proof URLs with the printed token return documents that verify against
// the data directory's fleet CA, within the head interval. /metrics shows
// the forwarder's backlog.
func TestDevAudit(t *testing.T) {
	data := t.TempDir()
	o := newOutputs()
	d := startCommand(t, o, "dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--central-addr", "127.0.0.1:0", "--head-interval", "200ms", "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	d.match(t, `(\(REQ: the X-Request-Id header of a gateway response\))`)
	banner := d.out.String()
	key := d.match(t, `Demo key:\s+(tgk_\S+)`)
	base := d.match(t, `Base URL:\s+(http://\S+)/v1`)
	metrics := d.match(t, `Metrics:\s+http://(\S+)/metrics`)
	token := d.match(t, `Bearer (tga_dev_[a-z0-9]+)'`)
	headsURL := d.match(t, `Heads:\s+curl -s -H '[^']*' "([^"]+)" > heads.json`)
	proofURL := d.match(t, `Proof:\s+curl -s -H '[^']*' "([^"]+)" > proof.json`)
	ca := filepath.Join(data, fleet.CACertFile)
	for _, want := range []string{"verify head heads.json --ca " + ca, "verify proof proof.json --ca " + ca} {
		if !strings.Contains(banner, want) {
			t.Fatalf("banner lacks %q:\n%s", want, banner)
		}
	}

	requestID := webtest.Chat(t, base, key, "hello")

	today := strings.NewReplacer("$(date -u +%F)", ids.Day(time.Now()), "REQ", requestID)
	caCert, err := verify.LoadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	var proof []byte
	o.waitFor(t, "a proof of the request at the central plane", func() bool {
		var st int
		st, proof = httpGet(t, today.Replace(proofURL), token)
		return st == http.StatusOK
	})
	if p, err := verify.ProofDocument(proof, caCert, nil); err != nil || p.RequestID != requestID {
		t.Fatalf("proof %s: %v", proof, err)
	}
	st, heads := httpGet(t, today.Replace(headsURL), token)
	if st != http.StatusOK {
		t.Fatalf("heads: %d %s", st, heads)
	}
	if got, err := verify.HeadsDocument(heads, caCert); err != nil || len(got) != 1 || got[0].TenantID != "demo" {
		t.Fatalf("heads %s: %v", heads, err)
	}
	if st, body := httpGet(t, "http://"+metrics+"/metrics", ""); st != http.StatusOK || !bytes.Contains(body, []byte("tollgate_central_forward_backlog_heads ")) {
		t.Fatalf("metrics: %d %s", st, body)
	}
}

// TestDevDemoKeyWhenNotUp: the demo key is minted before the appliance
// starts (so the banner never shows a key the gateway does not know yet);
// when the appliance then fails to start, its secret is still shown, once.
func TestDevDemoKeyWhenNotUp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"dev", "--data", data, "--gateway-addr", taken.Addr().String(), "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--central-addr", "", "--log-level", "error"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "did not start") || !strings.Contains(out.String(), "Demo key:  tgk_") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if again := runDevUntilUp(t, data); strings.Contains(again, "Demo key:  tgk_") || !strings.Contains(again, "was shown once when") {
		t.Fatalf("the next start showed a secret again:\n%s", again)
	}
}

// TestCentralIngestMaxConns: --ingest-max-conns reaches the ingest
// listener: with 1, a second connection is refused while the first one is
// open, and the refusal is logged with the bound.
func TestCentralIngestMaxConns(t *testing.T) {
	o := newOutputs()
	c := startCommand(t, o, "central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", t.TempDir(),
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--ingest-max-conns", "1")
	ingest := c.match(t, `Ingest:\s+(\S+) \(mTLS`)
	for i := range 2 {
		conn, err := net.Dial("tcp", ingest)
		if err != nil {
			if i == 1 && errors.Is(err, syscall.ECONNRESET) {
				break // refused before the connect returned
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
	}
	o.waitFor(t, "the second connection refused", func() bool {
		return regexp.MustCompile(`msg="central: ingest connection refused, too many open" .*max_conns=1 `).MatchString(c.errOut.String())
	})
}

// TestCentralIngestMaxUploadTime: --ingest-max-upload-time reaches the
// ingest service: an upload that sends nothing is ended for taking too
// long (DeadlineExceeded) before the idle timeout (30 s) would end it.
func TestCentralIngestMaxUploadTime(t *testing.T) {
	f := centraltest.NewFleet(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "fleet-ca.pem")
	if err := os.WriteFile(caFile, f.CA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "central")
	o := newOutputs()
	c := startCommand(t, o, "central", "--fleet-ca", caFile, "--data", data,
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--ingest-max-upload-time", "100ms")
	ingest := c.match(t, `Ingest:\s+(\S+) \(mTLS`)
	trust := c.match(t, `appliances trust (\S+)\)`)
	certPEM, err := os.ReadFile(trust)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := tlsconf.Pool(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(ingest, grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(f.Appliance(t, "app_cmdtime"), roots, "127.0.0.1"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	stream, err := centralv1.NewCentralAuditServiceClient(conn).PublishHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(new(centralv1.PublishHeadResponse))
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "took longer than 100ms") {
		t.Fatalf("an upload that sends nothing: %v, want DeadlineExceeded, took longer than 100ms", err)
	}
}
