package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// silentIngest is a central plane's ingest that takes every upload and
// never answers it: it signals each on uploads and holds it until the
// appliance gives up on it.
type silentIngest struct {
	centralv1.UnimplementedCentralAuditServiceServer
	uploads chan struct{}
}

func (s *silentIngest) PublishHead(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse]) error {
	select {
	case s.uploads <- struct{}{}:
	default: // the test has seen enough
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// TestGatewayCentralUploadTimeout: --central-upload-timeout reaches the
// forwarder: an upload to a central plane that takes it and never
// answers is abandoned at that timeout, logged as such, and retried.
// With the default (15 minutes) the test's hang guard, a minute, ends it.
func TestGatewayCentralUploadTimeout(t *testing.T) {
	dir := t.TempDir()
	pki, appDir := issueAppliance(t, dir, "app_cmdupload")
	ca, err := fleet.LoadCACert(filepath.Join(pki, fleet.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	cert, certPEM, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(dir, "central-ingest.pem")
	if err := os.WriteFile(trust, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ingest := &silentIngest{uploads: make(chan struct{}, 2)}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsconf.Server(cert, ca))))
	centralv1.RegisterCentralAuditServiceServer(srv, ingest)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop) // after the gateway's stop, registered below

	endpoints := etcdtest.Endpoints(t)
	secret := createKey(t, endpoints, fmt.Sprintf("app_cmdupload-%d", time.Now().UnixNano()))
	o := newOutputs()
	g := startCommand(t, o, "gateway", "--etcd-endpoints", strings.Join(endpoints, ","), "--data", appDir,
		"--policy", "../../examples/policy", "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--head-interval", "100ms", "--log-level", "warn",
		"--central-ingest", lis.Addr().String(), "--central-ca", trust, "--central-upload-timeout", "100ms")
	base := g.match(t, `Base URL:\s+(http://\S+)/v1`)
	webtest.Chat(t, base, secret, "hello")

	awaitUpload := func(what string) {
		t.Helper()
		select {
		case <-ingest.uploads:
		case <-time.After(time.Minute): // a hang guard, not a timing
			t.Fatalf("%s did not reach the central plane within a minute:\n%s", what, g.errOut.String())
		}
	}
	awaitUpload("the head")
	abandoned := regexp.MustCompile(`central plane unreachable; heads stay queued" .*no answer from the central plane within 100ms \(the upload timeout\)`)
	o.waitFor(t, "the upload abandoned at the upload timeout", func() bool { return abandoned.MatchString(g.errOut.String()) })
	awaitUpload("the retry")
}

// TestDevCentralUploadTimeout: dev's --central-upload-timeout reaches its
// forwarder too. Its in-process central plane answers every upload within
// milliseconds, so the test gives it a nanosecond: each upload is then
// abandoned at that timeout and logged as such, which with the default
// (15 minutes) none is.
func TestDevCentralUploadTimeout(t *testing.T) {
	o := newOutputs()
	d := startCommand(t, o, "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--central-addr", "127.0.0.1:0", "--head-interval", "100ms", "--log-level", "warn", "--central-upload-timeout", "1ns")
	key := d.match(t, `Demo key:\s+(tgk_\S+)`)
	base := d.match(t, `Base URL:\s+(http://\S+)/v1`)
	webtest.Chat(t, base, key, "hello")
	abandoned := regexp.MustCompile(`central plane unreachable; heads stay queued" .*no answer from the central plane within 1ns \(the upload timeout\)`)
	o.waitFor(t, "the upload abandoned at the upload timeout", func() bool { return abandoned.MatchString(d.errOut.String()) })
}

// TestCentralRESTWriteTimeout: --rest-write-timeout reaches the REST
// listener: a client that asks for a large heads list and reads none of
// it has its answer cut at that timeout (the plane counts the request
// once its answer has ended), instead of holding it for the default 2
// minutes, past the test's hang guard.
func TestCentralRESTWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "central")
	const day = "2026-03-01"
	// Heads of 1 MiB (a store does not check ingest's certificate bound),
	// twice what a sending socket may buffer and more (the client's side
	// buffers 4 KiB), so that the answer cannot end without the client.
	const certLen = 1 << 20
	heads := 2*webtest.SendBufferMax(t)/certLen + 2
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(data, centralDBFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range heads {
		h := head.Head{TenantID: "acme", ApplianceID: fmt.Sprintf("app_%02d", i), Day: day, MerkleRoot: head.EmptyRoot(), Signature: "sig",
			SignedAt: day + "T12:00:00Z", Certificate: strings.Repeat("c", certLen)}
		if err := st.Commit(context.Background(), store.Commit{Head: h, LeafRetentionDays: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	const token = "tga_cmd_test_writetimeout"
	tokens := filepath.Join(dir, "audit-tokens.yaml")
	if err := os.WriteFile(tokens, []byte("acme: [\""+token+"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	o := newOutputs()
	c := startCommand(t, o, "central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--audit-tokens", tokens, "--data", data,
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--rest-write-timeout", "100ms")
	rest := c.match(t, `REST:\s+http://([^/\s]+)/v1/`)
	metrics := c.match(t, `Metrics:\s+http://(\S+)/metrics`)

	conn := webtest.AskWithoutReading(t, rest, "/v1/tenants/acme/audit/heads?day="+day, token)
	ended := regexp.MustCompile(`\ntollgate_central_rest_requests_total\{code="\d+",route="heads"\} 1\n`)
	pollFor(t, "the answer to a client that reads nothing ended", func() bool {
		st, body := httpGet(t, "http://"+metrics+"/metrics", "")
		return st == http.StatusOK && ended.Match(body)
	})
	// What the client reads now is what the sockets held: the answer cut short.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
	if n, _ := io.Copy(io.Discard, conn); n >= int64(heads*certLen) {
		t.Fatalf("the client read %d bytes, the whole answer", n)
	}
}
