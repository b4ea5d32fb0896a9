package forward_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/forward"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// switchable is a client the test can cut off (Unavailable), make refuse
// the next calls (InvalidArgument), or make stall its next upload after
// the start message until the central plane ends it.
type switchable struct {
	centralv1.CentralAuditServiceClient
	down   atomic.Bool
	refuse atomic.Int32
	stall  atomic.Bool
	calls  atomic.Int32
}

// stalling is an upload that sends nothing after its start message: its
// first leaf chunk waits for the central plane to end the stream instead.
type stalling struct {
	grpc.ClientStreamingClient[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse]
}

func (s stalling) Send(m *centralv1.PublishHeadRequest) error {
	if m.GetStart() != nil {
		return s.ClientStreamingClient.Send(m)
	}
	_ = s.RecvMsg(new(centralv1.PublishHeadResponse)) // the end; CloseAndRecv has its status
	return io.EOF
}

func (s *switchable) PublishHead(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse], error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, status.Error(codes.Unavailable, "central plane cut off by the test")
	}
	if s.refuse.Add(-1) >= 0 {
		return nil, status.Error(codes.InvalidArgument, "refused by the test")
	}
	s.refuse.Store(0)
	stream, err := s.CentralAuditServiceClient.PublishHead(ctx, opts...)
	if err == nil && s.stall.CompareAndSwap(true, false) {
		return stalling{stream}, nil
	}
	return stream, err
}

type env struct {
	plane  *centraltest.Plane
	clock  *clocktest.Clock
	log    *auditlog.Log
	client *switchable
	fwd    *forward.Forwarder
	queue  string
	n      int
	// tweak, when set, adjusts the forwarder's options before open.
	tweak func(*forward.Options)
}

func setup(t *testing.T, tweaks ...func(*central.Config)) *env {
	t.Helper()
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		for _, tweak := range tweaks {
			tweak(c)
		}
	})
	app := p.Fleet.Appliance(t, "app_fwd")
	// Now: heads must not be signed ahead of the central plane's clock.
	c := clocktest.New(time.Now().UTC().Truncate(time.Second))
	l, err := auditlog.Open(t.TempDir(), auditlog.Options{Signer: app, Now: c.Now, Retention: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e := &env{plane: p, clock: c, log: l, client: &switchable{CentralAuditServiceClient: p.IngestClient(t, app)}, queue: filepath.Join(t.TempDir(), "forward.db")}
	e.open(t)
	return e
}

func (e *env) open(t *testing.T) {
	t.Helper()
	opts := forward.Options{Path: e.queue, Source: e.log, Client: e.client, LeafRetentionDays: 30, Now: e.clock.Now, MinBackoff: time.Millisecond}
	if e.tweak != nil {
		e.tweak(&opts)
	}
	f, err := forward.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.fwd = f
	t.Cleanup(func() { _ = f.Close() })
}

// record appends n events of tenant.
func (e *env) record(t *testing.T, tenant string, n int) {
	t.Helper()
	for range n {
		e.n++
		_, err := e.log.Append(context.Background(), auditlog.Event{
			RequestID: fmt.Sprintf("req_%s%d", tenant, e.n), TenantID: tenant, KeyID: "key_" + tenant,
			Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
			RequestBody: []byte(`{"q":1}`), ResponseBody: []byte(`{"a":2}`),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) sign(t *testing.T) []head.Head {
	t.Helper()
	heads, err := e.log.SignHeads(e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return heads
}

func (e *env) collect(t *testing.T, want int) {
	t.Helper()
	if n, err := e.fwd.Collect(context.Background()); err != nil || n != want {
		t.Fatalf("Collect = %d, %v; want %d", n, err, want)
	}
}

// checkCentral checks that the central plane holds the log's latest head of
// every tree of today, and serves a verifying proof of every event.
func (e *env) checkCentral(t *testing.T, tenants ...string) {
	t.Helper()
	ctx := context.Background()
	day := e.clock.Now().UTC().Format("2006-01-02")
	for _, tenant := range tenants {
		want, err := e.log.Head(tenant, day)
		if err != nil {
			t.Fatal(err)
		}
		id := store.TreeOf(want)
		got, err := e.plane.Store.Tree(ctx, id)
		if err != nil || got.Head != want {
			t.Fatalf("central holds %+v (%v), the log %+v", got.Head, err, want)
		}
		leaves, err := e.log.Leaves(tenant, day, 0, want.LastSequence)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leaves {
			p, err := e.plane.Store.Proof(ctx, id, l.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			doc := verify.ProofDoc{ApplianceID: id.ApplianceID, Day: day, RequestID: l.RequestID, Sequence: p.Leaf.Sequence,
				LeafIndex: p.Leaf.LeafIndex, TreeSize: p.Head.EventCount, LeafHash: p.Leaf.LeafHash, AuditPath: p.Hashes, Head: p.Head}
			if err := verify.Proof(doc, e.plane.Fleet.CA.Cert); err != nil {
				t.Fatalf("proof of %s: %v", l.RequestID, err)
			}
			ev, err := e.log.Event(l.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.Leaf(doc, ev.LeafBytes); err != nil {
				t.Fatal(err)
			}
			// The plane holds the appliance's canonical leaf, byte for byte.
			if string(p.Leaf.Leaf) != string(ev.LeafBytes) {
				t.Fatalf("central holds leaf %q of %s, the log %q", p.Leaf.Leaf, l.RequestID, ev.LeafBytes)
			}
		}
	}
}

func TestForward(t *testing.T) {
	e := setup(t)
	e.record(t, "acme", 3)
	e.record(t, "globex", 2)
	e.sign(t)
	e.collect(t, 2)
	if b := e.fwd.Backlog(); b.Heads != 2 || b.Leaves != 5 {
		t.Fatalf("backlog %+v", b)
	}
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 || b.Leaves != 0 {
		t.Fatalf("backlog after flush %+v", b)
	}
	e.checkCentral(t, "acme", "globex")
	// Growth: only the new leaves travel.
	e.record(t, "acme", 4)
	e.sign(t)
	e.collect(t, 1)
	if b := e.fwd.Backlog(); b.Heads != 1 || b.Leaves != 4 {
		t.Fatalf("backlog %+v", b)
	}
	e.collect(t, 0)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.checkCentral(t, "acme", "globex")
}

// TestEndedUploadIsRetried: an upload the central plane ends, for
// stalling (its idle timeout) or for taking longer than its maximum upload
// time, with DeadlineExceeded, is not a refusal: the head stays queued,
// and the next flush stores it.
func TestEndedUploadIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		tune          func(*central.Config)
	}{
		{"idle", "sent no message", func(c *central.Config) { c.IngestIdleTimeout = 50 * time.Millisecond }},
		{"too long", "took longer than", func(c *central.Config) {
			c.IngestIdleTimeout = time.Hour
			c.IngestMaxUploadTime = 50 * time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, tc.tune)
			e.record(t, "acme", 2)
			e.sign(t)
			e.collect(t, 1)
			e.client.stall.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
			defer cancel()
			err := e.fwd.Flush(ctx)
			if st := status.Convert(errors.Unwrap(err)); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), tc.message) {
				t.Fatalf("flush of an upload ended (%s): %v, want DeadlineExceeded from the central plane", tc.name, err)
			}
			if b := e.fwd.Backlog(); b.Heads != 1 || b.Leaves != 2 {
				t.Fatalf("backlog after the ended upload %+v, want the head and its 2 leaves", b)
			}
			// The upload sent again meets the same short limit, which a
			// loaded machine can exceed too; the forwarder's answer to an
			// upload ended by the plane is to send it again.
			for attempt := 1; ; attempt++ {
				err := e.fwd.Flush(context.Background())
				if err == nil {
					break
				}
				if attempt == 5 || status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
					t.Fatalf("flush %d after the ended upload: %v", attempt, err)
				}
			}
			if b := e.fwd.Backlog(); b.Heads != 0 {
				t.Fatalf("backlog %+v", b)
			}
			e.checkCentral(t, "acme")
		})
	}
}

// TestStoreAndForward: while the central plane is unreachable the heads
// wait on disk, across a restart of the forwarder, and all arrive after.
func TestStoreAndForward(t *testing.T) {
	e := setup(t)
	e.client.down.Store(true)
	for i := range 3 {
		e.record(t, "acme", 2+i)
		e.sign(t)
		e.collect(t, 1)
		if err := e.fwd.Flush(context.Background()); status.Code(err) != codes.Unavailable {
			t.Fatalf("flush while down: %v", err)
		}
	}
	if b := e.fwd.Backlog(); b.Heads != 3 || b.Leaves != 9 || b.Oldest.IsZero() {
		t.Fatalf("backlog %+v", b)
	}
	// A restart keeps the queue and does not queue a head twice.
	if err := e.fwd.Close(); err != nil {
		t.Fatal(err)
	}
	e.open(t)
	e.collect(t, 0)
	e.client.down.Store(false)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 {
		t.Fatalf("backlog %+v", b)
	}
	heads, err := e.plane.Store.Heads(context.Background(), store.TreeID{TenantID: "acme", ApplianceID: "app_fwd", Day: e.clock.Now().UTC().Format("2006-01-02")})
	if err != nil || len(heads) != 3 {
		t.Fatalf("central holds %d heads, %v", len(heads), err)
	}
	e.checkCentral(t, "acme")
}

// TestResendIsHarmless: a head the central plane stored but the forwarder
// did not dequeue (a crash between the two) is sent again and accepted as
// a duplicate.
func TestResendIsHarmless(t *testing.T) {
	e := setup(t)
	e.record(t, "acme", 2)
	e.sign(t)
	e.collect(t, 1)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second forwarder on a fresh queue (the first one's lost) queues
	// every head again, from the first leaf.
	e.queue = filepath.Join(t.TempDir(), "forward.db")
	e.open(t)
	e.record(t, "acme", 1)
	e.sign(t)
	e.collect(t, 2)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.checkCentral(t, "acme")
}

// TestRefusedThenGap: a head refused for good is set aside; the next head
// starts past what the central plane holds, which answers leaf_gap, and
// the forwarder resends the missing leaves.
func TestRefusedThenGap(t *testing.T) {
	e := setup(t)
	e.record(t, "acme", 2)
	e.sign(t)
	e.record(t, "acme", 2)
	e.sign(t)
	e.collect(t, 2)
	e.client.refuse.Store(1)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 || b.Refused != 1 {
		t.Fatalf("backlog %+v", b)
	}
	e.checkCentral(t, "acme")
}

// TestRefusedBounded: the queue keeps at most MaxRefused refused heads,
// the newest.
func TestRefusedBounded(t *testing.T) {
	e := setup(t)
	_ = e.fwd.Close()
	e.tweak = func(o *forward.Options) { o.MaxRefused = 2 }
	e.open(t)
	for range 4 {
		e.record(t, "acme", 1)
		e.sign(t)
		e.collect(t, 1)
		e.client.refuse.Store(1)
		if err := e.fwd.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if b := e.fwd.Backlog(); b.Heads != 0 || b.Refused != 2 {
		t.Fatalf("backlog %+v, want no head left and 2 refused kept", b)
	}
}

// TestDayCompletes: once a day's trees have final heads queued, later
// collections skip the day.
func TestDayCompletes(t *testing.T) {
	e := setup(t)
	e.clock.Advance(-24 * time.Hour) // yesterday
	e.record(t, "acme", 1)
	e.sign(t)
	e.collect(t, 1)
	e.clock.Advance(24 * time.Hour)
	e.sign(t) // finalizes yesterday
	e.collect(t, 1)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	yesterday := e.clock.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
	got, err := e.plane.Store.Tree(context.Background(), store.TreeID{TenantID: "acme", ApplianceID: "app_fwd", Day: yesterday})
	if err != nil || !got.Head.Final() || got.Heads != 2 {
		t.Fatalf("central: %+v, %v", got, err)
	}
	src := &countingSource{Source: e.log}
	f, err := forward.Open(forward.Options{Path: filepath.Join(t.TempDir(), "q2.db"), Source: src, Client: e.client, LeafRetentionDays: 30, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 2 {
		if _, err := f.Collect(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if src.froms[0] != "" || src.froms[1] != e.clock.Now().UTC().Format("2006-01-02") {
		t.Fatalf("Days called from %q", src.froms)
	}
}

// TestTreeAfterTheListing: a tenant whose first event of a day is
// acknowledged just after Collect listed the day's trees, the day being
// finalized before the listed trees are read, is forwarded by the next
// Collect: the day is not complete while a tree appeared that was not read.
func TestTreeAfterTheListing(t *testing.T) {
	e := setup(t)
	today := e.clock.Now()
	yesterday := today.AddDate(0, 0, -1)
	e.clock.Set(yesterday)
	e.record(t, "acme", 1)
	e.sign(t)
	e.clock.Set(today) // the log's open day is still yesterday
	src := &lateTenantSource{Source: e.log, day: yesterday.UTC().Format("2006-01-02"), hook: func() {
		e.clock.Set(yesterday.Add(time.Second))
		e.record(t, "globex", 1) // joins yesterday, after the listing
		e.clock.Set(today)
		e.sign(t) // finalizes yesterday
	}}
	f, err := forward.Open(forward.Options{Path: filepath.Join(t.TempDir(), "q2.db"), Source: src, Client: e.client, LeafRetentionDays: 30, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Collect(context.Background()); err != nil || n != 2 {
		t.Fatalf("first Collect = %d, %v; want acme's two heads", n, err)
	}
	if n, err := f.Collect(context.Background()); err != nil || n != 1 {
		t.Fatalf("second Collect = %d, %v; want globex's final head", n, err)
	}
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		got, err := e.plane.Store.Tree(context.Background(), store.TreeID{TenantID: tenant, ApplianceID: "app_fwd", Day: src.day})
		if err != nil || !got.Head.Final() {
			t.Fatalf("central: %s: %+v, %v", tenant, got, err)
		}
	}
	// Now the day is complete: the next Collect does not read it again.
	listed := len(src.listed)
	if n, err := f.Collect(context.Background()); err != nil || n != 0 {
		t.Fatalf("third Collect = %d, %v", n, err)
	}
	if len(src.listed) != listed {
		t.Fatalf("the day's trees are still listed after it completed: %q", src.listed[listed:])
	}
}

// lateTenantSource runs hook once, right after the first listing of day's
// trees, and answers that listing as it was before the hook.
type lateTenantSource struct {
	forward.Source
	day    string
	hook   func()
	listed []string // the days whose trees were listed, in order
}

func (s *lateTenantSource) Tenants(day string) ([]string, error) {
	s.listed = append(s.listed, day)
	tenants, err := s.Source.Tenants(day)
	if day == s.day && s.hook != nil {
		s.hook()
		s.hook = nil
	}
	return tenants, err
}

type countingSource struct {
	forward.Source
	froms []string
}

func (c *countingSource) Days(from string) ([]string, error) {
	c.froms = append(c.froms, from)
	return c.Source.Days(from)
}

// TestRun: Run keeps retrying with a backoff that doubles from MinBackoff
// up to MaxBackoff (each wait drawn from [b/2, b]) while the central plane
// is down, delivers once it is back, then polls again every PollInterval.
// The waits go through Options.After, so the test sees each one and ends
// it at once.
func TestRun(t *testing.T) {
	e := setup(t)
	waits := make(chan time.Duration)
	release := make(chan time.Time)
	stored := make(chan head.Head, 8)
	const (
		lo, hi = time.Second, 8 * time.Second
		poll   = 3 * time.Second
	)
	logs := &lockedbuf.Buffer{}
	e.tweak = func(o *forward.Options) {
		o.MinBackoff, o.MaxBackoff, o.PollInterval = lo, hi, poll
		o.After = func(d time.Duration) <-chan time.Time { waits <- d; return release }
		o.OnStored = func(h head.Head) { stored <- h }
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	_ = e.fwd.Close()
	e.open(t)
	e.client.down.Store(true)
	e.record(t, "acme", 2)
	signed := e.sign(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.fwd.Run(ctx) }()
	for i, bound := range []time.Duration{lo, 2 * lo, 4 * lo, hi, hi, hi} {
		d := <-waits
		if d < bound/2 || d > bound {
			t.Fatalf("wait %d after a failure: %s, want within [%s, %s]", i+1, d, bound/2, bound)
		}
		if b := e.fwd.Backlog(); b.Heads != 1 || b.Leaves != 2 {
			t.Fatalf("backlog while down: %+v", b)
		}
		if i == 5 {
			e.client.down.Store(false)
		}
		release <- time.Time{}
	}
	if h := <-stored; h != signed[0] {
		t.Fatalf("stored %+v, signed %+v", h, signed[0])
	}
	// Delivered: the backoff is over, the next wait is the poll interval.
	if d := <-waits; d != poll {
		t.Fatalf("wait after a delivery: %s, want %s", d, poll)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 {
		t.Fatalf("backlog after delivery: %+v", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls := e.client.calls.Load(); calls != 7 {
		t.Fatalf("%d publish attempts, want 6 failures and 1 success", calls)
	}
	// Each failure logged the backlog and the wait.
	var warned int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Level, Msg    string
			BacklogHeads  int    `json:"backlog_heads"`
			BacklogLeaves int    `json:"backlog_leaves"`
			RetryIn       string `json:"retry_in"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "WARN" && l.BacklogHeads == 1 && l.BacklogLeaves == 2 && l.RetryIn != "" {
			warned++
		}
	}
	if warned != 6 {
		t.Fatalf("%d warnings with the backlog, want 6:\n%s", warned, logs.String())
	}
	e.checkCentral(t, "acme")
}

// TestMetrics: the backlog is exported to Prometheus (heads, leaves, age
// of the oldest head) with the outcome counters, and follows the queue.
func TestMetrics(t *testing.T) {
	e := setup(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.fwd.Metrics())
	e.client.down.Store(true)
	e.record(t, "acme", 3)
	e.sign(t)
	e.collect(t, 1)
	e.clock.Advance(90 * time.Second)
	e.record(t, "acme", 2)
	e.sign(t)
	e.collect(t, 1)
	e.clock.Advance(30 * time.Second)
	want := map[string]float64{
		"tollgate_central_forward_backlog_heads":                  2,
		"tollgate_central_forward_backlog_leaves":                 5,
		"tollgate_central_forward_backlog_age_seconds":            120,
		`tollgate_central_forward_heads_total{outcome="queued"}`:  2,
		`tollgate_central_forward_heads_total{outcome="stored"}`:  0,
		`tollgate_central_forward_heads_total{outcome="refused"}`: 0,
	}
	checkMetrics(t, reg, want)
	e.client.down.Store(false)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want["tollgate_central_forward_backlog_heads"] = 0
	want["tollgate_central_forward_backlog_leaves"] = 0
	want["tollgate_central_forward_backlog_age_seconds"] = 0
	want[`tollgate_central_forward_heads_total{outcome="stored"}`] = 2
	checkMetrics(t, reg, want)
}

func checkMetrics(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf(`{%s="%s"}`, l.GetName(), l.GetValue())
			}
			switch {
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("metrics\n got %v\nwant %v", got, want)
	}
}

func TestRetentionDays(t *testing.T) {
	for _, c := range []struct {
		bodies time.Duration
		want   int
	}{
		{0, 1}, {time.Hour, 1}, {24 * time.Hour, 1}, {36 * time.Hour, 2}, {90 * 24 * time.Hour, 90},
		{(7*365 + 2) * 24 * time.Hour, 2557},
	} {
		if got := forward.RetentionDays(c.bodies); got != c.want {
			t.Errorf("RetentionDays(%s) = %d, want %d", c.bodies, got, c.want)
		}
	}
}
