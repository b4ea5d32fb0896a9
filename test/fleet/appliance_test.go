package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/forward"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// appliance is a simulated appliance: a tenant's tree of canonical
// leaves that grows and is signed with the appliance's own certificate,
// read by the real forwarder (audit/forward) through its Source
// interface, as it reads an appliance's audit log, and published over
// mTLS with the forwarder's dial options.
type appliance struct {
	app  *fleet.Appliance
	mu   sync.Mutex
	tree *centraltest.Tree
	// heads are the heads signed, in order.
	heads  []head.Head
	fwd    *forward.Forwarder
	conn   *grpc.ClientConn
	stored atomic.Int64 // heads the central plane stored (OnStored)
	// lastStored is when the last head was stored, in UnixNano.
	lastStored atomic.Int64
}

var _ forward.Source = (*appliance)(nil)

// grow adds n leaves to the tree and signs a head of it.
func (a *appliance) grow(t *testing.T, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tree.Add(n)
	a.heads = append(a.heads, a.tree.Head(t, time.Now()))
}

// Days implements forward.Source: the tree's one day.
func (a *appliance) Days(from string) ([]string, error) {
	if a.tree.Day < from {
		return nil, nil
	}
	return []string{a.tree.Day}, nil
}

// Tenants implements forward.Source.
func (a *appliance) Tenants(day string) ([]string, error) {
	if day != a.tree.Day {
		return nil, nil
	}
	return []string{a.tree.Tenant}, nil
}

// HeadsFrom implements forward.Source.
func (a *appliance) HeadsFrom(tenant, day string, from uint64) ([]head.Head, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tenant != a.tree.Tenant || day != a.tree.Day || from >= uint64(len(a.heads)) {
		return nil, nil
	}
	return append([]head.Head(nil), a.heads[from:]...), nil
}

// Leaves implements forward.Source: the leaves with sequence in
// (afterSeq, toSeq].
func (a *appliance) Leaves(tenant, day string, afterSeq, toSeq uint64) ([]auditlog.LeafRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tenant != a.tree.Tenant || day != a.tree.Day {
		return nil, nil
	}
	ls := a.tree.Leaves
	lo := sort.Search(len(ls), func(i int) bool { return ls[i].Sequence > afterSeq })
	hi := sort.Search(len(ls), func(i int) bool { return ls[i].Sequence > toSeq })
	out := make([]auditlog.LeafRef, 0, max(0, hi-lo))
	for _, l := range ls[lo:hi] {
		out = append(out, auditlog.LeafRef{RequestID: l.RequestID, Sequence: l.Sequence, LeafIndex: l.LeafIndex, LeafHash: l.LeafHash, Leaf: l.Leaf})
	}
	return out, nil
}

// forwarderOptions are the simulated appliances' forwarder settings: a
// real appliance's, compressed in time as its head interval is.
type forwarderOptions struct {
	addr, serverName string
	serverCertPEM    []byte
	period           time.Duration // the compressed head interval
	logger           *slog.Logger
}

// open dials the central plane (through the balancer) as the appliance,
// with the forwarder's keepalive, and opens its queue in dir.
func (a *appliance) open(t *testing.T, dir string, o forwarderOptions) {
	t.Helper()
	roots, err := tlsconf.Pool(o.serverCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	a.conn, err = grpc.NewClient(o.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(a.app, roots, o.serverName))),
		grpc.WithKeepaliveParams(forward.Keepalive))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.conn.Close() })
	a.fwd, err = forward.Open(forward.Options{
		Path: filepath.Join(dir, a.app.ID+".db"), Source: a, Client: centralv1.NewCentralAuditServiceClient(a.conn),
		LeafRetentionDays: 30,
		// An appliance polls at a quarter of its head interval, and
		// backs off from 1 s to 5 min: the same, compressed.
		PollInterval: max(o.period/4, 10*time.Millisecond),
		MinBackoff:   max(o.period/60, 20*time.Millisecond), MaxBackoff: max(o.period*5, time.Second),
		UploadTimeout: time.Minute,
		Logger:        o.logger.With("appliance_id", a.app.ID),
		OnStored: func(head.Head) {
			a.stored.Add(1)
			a.lastStored.Store(time.Now().UnixNano())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.fwd.Close() })
}

// countingHandler counts the forwarders' log records by message, so that
// the test can report how many sends failed and were retried.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := fmt.Sprintf("%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			// What the central plane answered: its gRPC code, and its
			// refusal reason when it gave one (busy, conflict).
			key += " (" + status.Code(err).String()
			if reason, _, ok := centralclient.RefusalOf(err); ok {
				key += " " + reason
			} else if strings.Contains(status.Convert(err).Message(), "is busy") {
				key += " busy"
			}
			key += ")"
		}
		return true
	})
	h.counts[key]++
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}
