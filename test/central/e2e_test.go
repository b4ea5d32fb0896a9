// Package central_test is the end-to-end test of the central plane: a real
// appliance (embedded etcd, gateway, audit log) serves requests, signs
// heads and forwards them over mTLS to a central plane; the REST API,
// read with plain HTTP, returns heads, a tree's history, inclusion and
// consistency proofs that `tollgate verify` accepts and that fail after any
// byte is changed. central.test.ts does
// the same with the generated TypeScript client against `tollgate dev`.
package central_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/forward"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// buildTollgate builds the binary the test runs `tollgate verify` with.
func buildTollgate(t *testing.T) string {
	t.Helper()
	bin, err := tollgatetest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

const (
	key   = "tgk_test_central_acme"
	token = "tga_test_central_acme"
)

// world is an appliance forwarding to a central plane.
type world struct {
	gateway, rest string
	dir           string
	app           *fleet.Appliance
	audit         *auditlog.Log
	// stored receives every head the forwarder delivered to the central
	// plane.
	stored chan head.Head
}

func start(t *testing.T) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &world{dir: t.TempDir(), stored: make(chan head.Head, 1024)}
	app, caCert, err := fleet.EnsureDev(w.dir, "app_e2e")
	if err != nil {
		t.Fatal(err)
	}
	w.app = app
	if w.audit, err = auditlog.Open(filepath.Join(w.dir, "audit"), auditlog.Options{Signer: app}); err != nil {
		t.Fatal(err)
	}
	sd, err := seed.Load("seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Client(t)
	if err := sd.Apply(ctx, keys.NewStore(cli, nil)); err != nil {
		t.Fatal(err)
	}
	tokens := auth.NewTokens()
	if err := sd.ApplyAuditTokens(ctx, tokens); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(w.dir, "central.db"))
	if err != nil {
		t.Fatal(err)
	}
	cert, certPEM, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var done []chan error
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			if err := <-d; err != nil {
				t.Error(err)
			}
		}
		_ = st.Close()
		_ = w.audit.Close()
	})
	run := func(f func() error) {
		d := make(chan error, 1)
		done = append(done, d)
		go func() { d <- f() }()
	}
	centralReady := make(chan central.Addrs, 1)
	run(func() error {
		return central.Run(ctx, central.Config{Store: st, Tokens: tokens, FleetCA: caCert, IngestCert: cert,
			RESTAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", IngestAddr: "127.0.0.1:0",
			OnReady: func(a central.Addrs) { centralReady <- a }})
	})
	addrs := <-centralReady
	w.rest = "http://" + addrs.REST
	roots, _ := tlsconf.Pool(certPEM)
	conn, err := grpc.NewClient(addrs.Ingest, grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(app, roots, "127.0.0.1"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	fwd, err := forward.Open(forward.Options{Path: filepath.Join(w.dir, "forward.db"), Source: w.audit,
		Client: centralv1.NewCentralAuditServiceClient(conn), LeafRetentionDays: 90, PollInterval: 50 * time.Millisecond,
		OnStored: func(h head.Head) { w.stored <- h }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })
	run(func() error { return fwd.Run(ctx) })
	gwReady := make(chan appliance.Addrs, 1)
	run(func() error {
		return appliance.Run(ctx, appliance.Config{GatewayAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Etcd: cli,
			Logger: slog.New(slog.DiscardHandler), ApplianceID: app.ID, Audit: w.audit, HeadInterval: 100 * time.Millisecond,
			OnReady: func(a appliance.Addrs) { gwReady <- a }})
	})
	w.gateway = "http://" + (<-gwReady).Gateway
	return w
}

// chat sends a request through the gateway and returns its request id.
func (w *world) chat(t *testing.T, text string) string {
	t.Helper()
	return webtest.Chat(t, w.gateway, key, text)
}

// get reads the REST API as curl would.
func (w *world) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	code, _, body := webtest.Get(t, w.rest+path, token)
	return code, body
}

// tollgateVerify runs `tollgate verify` on a document.
func tollgateVerify(t *testing.T, bin, kind string, doc []byte, ca string, extra ...string) (int, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), kind+".json")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, append([]string{"verify", kind, file, "--ca", ca}, extra...)...).Output()
	code := 0
	if e := (*exec.ExitError)(nil); errors.As(err, &e) {
		code = e.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

func TestEndToEnd(t *testing.T) {
	bin := buildTollgate(t)
	w := start(t)
	ids3 := []string{w.chat(t, "one"), w.chat(t, "two"), w.chat(t, "three")}
	day := ids.Day(time.Now())
	// Heads are signed every 100ms and forwarded within 50ms: wait until
	// the forwarder has delivered one that covers the three events.
	w.waitFor(t, 3)
	st, heads := w.get(t, "/v1/tenants/acme/audit/heads?day="+day)
	if st != http.StatusOK || !bytes.Contains(heads, []byte(`"event_count":3,`)) {
		t.Fatalf("heads: %d %s", st, heads)
	}
	ca := filepath.Join(w.dir, fleet.CACertFile)
	if code, out := tollgateVerify(t, bin, "head", heads, ca); code != 0 {
		t.Fatalf("tollgate verify head: %d %s", code, out)
	}
	caCert, err := verify.LoadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids3 {
		st, proof := w.get(t, fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", w.app.ID, day, id))
		if st != http.StatusOK {
			t.Fatalf("proof: %d %s", st, proof)
		}
		// The canonical leaf, as the appliance's AuditService.GetEvent
		// returns it, binds request_id and sequence too.
		ev, err := w.audit.Event(id)
		if err != nil {
			t.Fatal(err)
		}
		leafFile := filepath.Join(t.TempDir(), "leaf.json")
		if err := os.WriteFile(leafFile, ev.LeafBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := tollgateVerify(t, bin, "proof", proof, ca, "--leaf", leafFile)
		var v struct {
			OK        bool   `json:"ok"`
			RequestID string `json:"request_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !v.OK || v.RequestID != id {
			t.Fatalf("tollgate verify proof: %d %s", code, out)
		}
		// A changed byte fails with the CLI...
		tampered := bytes.Replace(proof, []byte(`"leaf_index":`), []byte(`"leaf_index":1`), 1)
		if code, out := tollgateVerify(t, bin, "proof", tampered, ca, "--leaf", leafFile); code == 0 {
			t.Fatalf("a tampered proof verified: %s", out)
		}
		// ... and any changed byte fails the same checks in process.
		everyByteFails(t, proof, func(b []byte) error { _, err := verify.ProofDocument(b, caCert, ev.LeafBytes); return err })
	}
	everyByteFails(t, heads, func(b []byte) error { _, err := verify.HeadsDocument(b, caCert); return err })

	// Two more events: the tree's history holds the head of 3 and one of
	// 5, and the plane proves that the second extends the first.
	w.chat(t, "four")
	w.chat(t, "five")
	w.waitFor(t, 5)
	st, history := w.get(t, fmt.Sprintf("/v1/tenants/acme/audit/history?appliance_id=%s&day=%s", w.app.ID, day))
	if st != http.StatusOK || !bytes.Contains(history, []byte(`"event_count":3,`)) || !bytes.Contains(history, []byte(`"event_count":5,`)) {
		t.Fatalf("history: %d %s", st, history)
	}
	if code, out := tollgateVerify(t, bin, "head", history, ca); code != 0 {
		t.Fatalf("tollgate verify head of the history: %d %s", code, out)
	}
	st, consistency := w.get(t, fmt.Sprintf("/v1/tenants/acme/audit/consistency?appliance_id=%s&day=%s&from_size=3&to_size=5", w.app.ID, day))
	if st != http.StatusOK {
		t.Fatalf("consistency: %d %s", st, consistency)
	}
	code, out := tollgateVerify(t, bin, "consistency", consistency, ca)
	var v struct {
		OK       bool   `json:"ok"`
		FromSize uint64 `json:"from_size"`
		ToSize   uint64 `json:"to_size"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !v.OK || v.FromSize != 3 || v.ToSize != 5 {
		t.Fatalf("tollgate verify consistency: %d %s", code, out)
	}
	everyByteFails(t, consistency, func(b []byte) error { _, err := verify.ConsistencyDocument(b, caCert); return err })
	// The appliance's key signs another view of its tree of 3 events: the
	// pair is forked, and no proof joins it.
	doc, err := verify.ParseConsistency(consistency)
	if err != nil {
		t.Fatal(err)
	}
	other := doc.FromHead
	other.MerkleRoot = strings.Repeat("ab", 32)
	forked, err := head.Sign(other, w.app, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	served, _ := json.Marshal(doc.FromHead)
	signed, _ := json.Marshal(forked)
	if code, out := tollgateVerify(t, bin, "consistency", bytes.Replace(consistency, served, signed, 1), ca); code != 11 {
		t.Fatalf("a forked pair: %d %s, want 11", code, out)
	}
}

// waitFor waits until the forwarder has delivered a head of acme's tree
// of n events to the central plane.
func (w *world) waitFor(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case h := <-w.stored:
			if h.TenantID == "acme" && h.EventCount == n {
				return
			}
		case <-deadline:
			t.Fatalf("no head of %d events reached the central plane in a minute", n)
		}
	}
}

func everyByteFails(t *testing.T, doc []byte, check func([]byte) error) {
	t.Helper()
	if err := check(doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc {
		mut := append([]byte(nil), doc...)
		mut[i] ^= 0x01
		if check(mut) == nil {
			t.Fatalf("byte %d changed from %q to %q still verifies: %s", i, doc[i], mut[i], mut)
		}
	}
}
