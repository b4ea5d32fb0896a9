// Package fleet_test runs a central plane as a fleet meets it: two
// `tollgate central` processes on one PostgreSQL schema behind a TCP load
// balancer, and a fleet of simulated appliances, each with its own
// certificate from the fleet CA, its own tree of canonical leaves and
// signed heads, published by the real forwarder (audit/forward) through
// the balancer. One replica is killed with SIGKILL mid-ingest and
// restarted; at the end every head and leaf every appliance produced is
// in PostgreSQL, and inclusion proofs from either replica verify. The
// test reports the ingest rate, the proof-serving rate and the storage
// each head and leaf takes (docs/central.md, "Running a fleet").
//
// The default size fits `make test`; TOLLGATE_FLEET=full runs the
// measured size (1,000 appliances), and TOLLGATE_FLEET_APPLIANCES,
// _ROUNDS, _LEAVES, _PERIOD and _PROOF_TIME set each figure.
package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/verify"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

var bin string

func TestMain(m *testing.M) { tollgatetest.Main(m, &bin) }

// size is how large a fleet the test runs.
type size struct {
	appliances int
	rounds     int           // heads each appliance signs
	leaves     int           // leaves each head adds
	period     time.Duration // an appliance's head interval (60 s), compressed
	proofTime  time.Duration // how long proofs are fetched for the rate
}

// sizes are the presets of TOLLGATE_FLEET.
var sizes = map[string]size{
	// Small enough for `make test` on two cores: a minute of heads in
	// half a second.
	"": {appliances: 60, rounds: 6, leaves: 10, period: 500 * time.Millisecond, proofTime: time.Second},
	// The measured fleet: 1,000 appliances at 100,000 requests a day each
	// (some 70 a minute), a minute of heads in 6 s (10x).
	"full": {appliances: 1000, rounds: 6, leaves: 70, period: 6 * time.Second, proofTime: 10 * time.Second},
}

func loadSize(t *testing.T) size {
	t.Helper()
	s, ok := sizes[os.Getenv("TOLLGATE_FLEET")]
	if !ok {
		t.Fatalf("TOLLGATE_FLEET=%q: want empty or full", os.Getenv("TOLLGATE_FLEET"))
	}
	for _, v := range []struct {
		name string
		p    *int
	}{{"APPLIANCES", &s.appliances}, {"ROUNDS", &s.rounds}, {"LEAVES", &s.leaves}} {
		if e := os.Getenv("TOLLGATE_FLEET_" + v.name); e != "" {
			n, err := strconv.Atoi(e)
			if err != nil || n < 1 || n > 100_000 {
				t.Fatalf("TOLLGATE_FLEET_%s=%q: want 1 to 100000", v.name, e)
			}
			*v.p = n
		}
	}
	for _, v := range []struct {
		name string
		p    *time.Duration
	}{{"PERIOD", &s.period}, {"PROOF_TIME", &s.proofTime}} {
		if e := os.Getenv("TOLLGATE_FLEET_" + v.name); e != "" {
			d, err := time.ParseDuration(e)
			if err != nil || d <= 0 || d > time.Hour {
				t.Fatalf("TOLLGATE_FLEET_%s=%q: want a duration up to 1h", v.name, e)
			}
			*v.p = d
		}
	}
	return s
}

// tenantCount is how many tenants the fleet's appliances serve (each
// appliance one, round robin).
const tenantCount = 10

func tenantOf(i int) string { return fmt.Sprintf("tenant%02d", i%tenantCount) }
func tokenOf(tenant string) string {
	return "tga_fleet_" + tenant
}

func TestFleetTwoReplicasOnePostgres(t *testing.T) {
	pgtest.Require(t)
	sz := loadSize(t)
	awayFromMidnight(t, 2*time.Duration(sz.rounds)*sz.period+10*time.Minute)
	fl := centraltest.NewFleet(t)
	tokens := map[string]string{}
	for i := range min(tenantCount, sz.appliances) {
		tokens[tenantOf(i)] = tokenOf(tenantOf(i))
	}
	p := newPlane(t, fl.CA.CertPEM, tokens)
	reps := []*replica{p.start(t, "a"), p.start(t, "b")}
	ingestLB := newBalancer(t, reps[0].ingest, reps[1].ingest)
	restLB := newBalancer(t, hostOf(reps[0].rest), hostOf(reps[1].rest))
	sizesBefore := tableSizes(t, p.schema)

	logs := &countingHandler{counts: map[string]int{}}
	fo := forwarderOptions{addr: ingestLB.addr(), serverName: "127.0.0.1", serverCertPEM: p.certPEM, period: sz.period, logger: slog.New(logs)}
	queues := t.TempDir()
	apps := make([]*appliance, sz.appliances)
	for i := range apps {
		app := fl.Appliance(t, fmt.Sprintf("app_fleet%04d", i))
		apps[i] = &appliance{app: app, tree: centraltest.NewTree(tenantOf(i), app)}
		apps[i].open(t, queues, fo)
	}
	total := int64(sz.appliances * sz.rounds)
	t.Logf("fleet: %d appliances, %d heads each of %d leaves, a head every %s (a minute compressed %.0fx): %.0f heads/s, %.0f leaves/s offered",
		sz.appliances, sz.rounds, sz.leaves, sz.period, float64(time.Minute)/float64(sz.period),
		float64(sz.appliances)/sz.period.Seconds(), float64(sz.appliances*sz.leaves)/sz.period.Seconds())

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var fwds sync.WaitGroup
	for _, a := range apps {
		fwds.Add(1)
		go func() {
			defer fwds.Done()
			_ = a.fwd.Run(ctx)
		}()
	}
	start := time.Now()
	var producers sync.WaitGroup
	for _, a := range apps {
		producers.Add(1)
		go func() {
			defer producers.Done()
			// Appliances sign at their own phase of the interval.
			next := start.Add(rand.N(sz.period))
			for range sz.rounds {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				a.grow(t, sz.leaves)
				next = next.Add(sz.period)
			}
		}()
	}
	stored := func() int64 {
		var n int64
		for _, a := range apps {
			n += a.stored.Load()
		}
		return n
	}
	waitStored := func(n int64, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for stored() < n {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		return true
	}

	// Mid-ingest: kill replica a, go on through b alone, restart a.
	bound := 2*time.Duration(sz.rounds)*sz.period + 5*time.Minute
	if !waitStored(total*2/5, bound) {
		t.Fatalf("only %d of %d heads stored before the kill", stored(), total)
	}
	killedAt := stored()
	servedBefore := ingestLB.served[0].Load()
	reps[0].kill()
	t.Logf("replica a killed (SIGKILL) with %d of %d heads stored, having taken %d appliance connections", killedAt, total, servedBefore)
	if !waitStored(killedAt+total/5, bound) {
		t.Fatalf("only %d of %d heads stored through replica b alone", stored(), total)
	}
	reps[0] = p.start(t, "a")
	ingestLB.set(0, reps[0].ingest)
	restLB.set(0, hostOf(reps[0].rest))
	t.Logf("replica a restarted with %d heads stored", stored())

	producers.Wait()
	if !waitStored(total, bound) {
		t.Fatalf("%d of %d heads stored; the forwarders logged %v", stored(), total, logs.snapshot())
	}
	var last int64
	for _, a := range apps {
		last = max(last, a.lastStored.Load())
	}
	elapsed := time.Unix(0, last).Sub(start)
	stop()
	fwds.Wait()
	t.Logf("ingest: %d heads, %d leaves in %s: %.0f heads/s, %.0f leaves/s, across the kill and restart",
		total, total*int64(sz.leaves), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), float64(total*int64(sz.leaves))/elapsed.Seconds())
	t.Logf("forwarders: %v; appliance connections per replica slot: a %d, b %d", logs.snapshot(), ingestLB.served[0].Load(), ingestLB.served[1].Load())

	checkStore(t, p.schema, apps)
	sizesAfter := tableSizes(t, p.schema)
	reportStorage(t, sizesBefore, sizesAfter, total, total*int64(sz.leaves))

	for _, r := range reps {
		checkProofs(t, r, fl, apps)
	}
	proofRate(t, "http://"+restLB.addr(), apps, sz.proofTime)
}

// hostOf is host:port of an http:// base URL.
func hostOf(base string) string { return strings.TrimPrefix(base, "http://") }

// connect opens a connection to the test PostgreSQL in schema.
func connect(t *testing.T, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// checkStore compares what PostgreSQL holds with what the appliances
// produced: every head, in order, byte for byte as signed, and every
// leaf's hash and canonical bytes.
func checkStore(t *testing.T, schema string, apps []*appliance) {
	t.Helper()
	ctx := waitCtx(t, 10*time.Minute)
	conn := connect(t, schema)
	byID := make(map[string]*appliance, len(apps))
	for _, a := range apps {
		byID[a.app.ID] = a
	}
	heads := map[string][]head.Head{}
	rows, err := conn.Query(ctx, "SELECT t.appliance_id, h.head FROM heads h JOIN trees t ON t.id = h.tree_id ORDER BY t.appliance_id, h.n")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			t.Fatal(err)
		}
		var h head.Head
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatal(err)
		}
		heads[id] = append(heads[id], h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var nHeads int
	for _, a := range apps {
		got := heads[a.app.ID]
		nHeads += len(got)
		if !reflect.DeepEqual(got, a.heads) {
			t.Errorf("%s: PostgreSQL holds %d heads, the appliance signed %d, or they differ", a.app.ID, len(got), len(a.heads))
		}
	}

	rows, err = conn.Query(ctx, "SELECT t.appliance_id, l.leaf_index, l.request_id, l.sequence, l.leaf_hash, l.leaf FROM leaves l JOIN trees t ON t.id = l.tree_id")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var nLeaves, bad, canonBytes int
	for rows.Next() {
		var (
			id, req     string
			idx, seq    int64
			hash, canon []byte
		)
		if err := rows.Scan(&id, &idx, &req, &seq, &hash, &canon); err != nil {
			t.Fatal(err)
		}
		nLeaves++
		canonBytes += len(canon)
		seen[id]++
		a := byID[id]
		if a == nil || idx < 0 || int(idx) >= len(a.tree.Leaves) {
			bad++
			continue
		}
		want := a.tree.Leaves[idx]
		if want.RequestID != req || want.Sequence != uint64(seq) || string(want.LeafHash) != string(hash) || string(want.Leaf) != string(canon) {
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		if seen[a.app.ID] != len(a.tree.Leaves) {
			t.Errorf("%s: PostgreSQL holds %d leaves, the appliance made %d", a.app.ID, seen[a.app.ID], len(a.tree.Leaves))
		}
	}
	if bad > 0 {
		t.Errorf("%d leaves in PostgreSQL differ from the appliances'", bad)
	}
	t.Logf("store: %d heads and %d leaves (canonical leaves of %d bytes on average) in PostgreSQL, each equal to the appliance's",
		nHeads, nLeaves, canonBytes/max(1, nLeaves))
}

// tableSizes is pg_total_relation_size (indexes and TOAST included) of
// each table of schema.
func tableSizes(t *testing.T, schema string) map[string]int64 {
	t.Helper()
	conn := connect(t, schema)
	rows, err := conn.Query(context.Background(), `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func reportStorage(t *testing.T, before, after map[string]int64, heads, leaves int64) {
	t.Helper()
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	var line strings.Builder
	var sum int64
	for _, n := range names {
		d := after[n] - before[n]
		sum += d
		fmt.Fprintf(&line, " %s +%d", n, d)
	}
	t.Logf("storage growth (pg_total_relation_size):%s; total +%d bytes", line.String(), sum)
	t.Logf("storage: %.0f bytes a head (heads), %.0f bytes a leaf (leaves and nodes), %.0f bytes a leaf all tables included",
		float64(after["heads"]-before["heads"])/float64(heads),
		float64(after["leaves"]-before["leaves"]+after["nodes"]-before["nodes"])/float64(leaves),
		float64(sum)/float64(leaves))
}

// proofURL is the REST path of the inclusion proof of a's leaf i.
func proofURL(a *appliance, i int) string {
	l := a.tree.Leaves[i]
	return fmt.Sprintf("/v1/tenants/%s/audit/proof?appliance_id=%s&day=%s&request_id=%s",
		a.tree.Tenant, url.QueryEscape(a.app.ID), a.tree.Day, url.QueryEscape(l.RequestID))
}

func getProof(client *http.Client, base string, a *appliance, i int) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, base+proofURL(a, i), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(a.tree.Tenant))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// checkProofs fetches from replica r a proof of a random leaf of up to
// 100 appliances, and verifies each as `tollgate verify proof` does,
// against the fleet CA and the leaf the appliance made.
func checkProofs(t *testing.T, r *replica, fl *centraltest.Fleet, apps []*appliance) {
	t.Helper()
	n := 0
	for k, a := range apps {
		if k >= 100 {
			break
		}
		i := rand.N(len(a.tree.Leaves))
		code, body, err := getProof(http.DefaultClient, r.rest, a, i)
		if err != nil || code != http.StatusOK {
			t.Fatalf("replica %s: proof of %s leaf %d: %d %s %v", r.name, a.app.ID, i, code, body, err)
		}
		p, err := verify.ProofDocument(body, fl.CA.Cert, a.tree.Leaves[i].Leaf)
		if err != nil {
			t.Fatalf("replica %s: proof of %s leaf %d does not verify: %v", r.name, a.app.ID, i, err)
		}
		if p.LeafIndex != uint64(i) {
			t.Fatalf("replica %s: proof of leaf %d is of leaf %d", r.name, i, p.LeafIndex)
		}
		n++
	}
	t.Logf("replica %s: %d inclusion proofs verified", r.name, n)
}

// proofRate fetches proofs of random leaves through the balancer with 16
// keep-alive clients for d (at most 10 million), and reports the rate;
// every answer must be 200.
func proofRate(t *testing.T, base string, apps []*appliance, d time.Duration) {
	t.Helper()
	const clients, maxProofs = 16, 10_000_000
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		ok, failed atomic.Int64
		firstErr   atomic.Value
		wg         sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ok.Load()+failed.Load() < maxProofs {
				a := apps[rand.N(len(apps))]
				code, body, err := getProof(client, base, a, rand.N(len(a.tree.Leaves)))
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", code, body, err))
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if failed.Load() > 0 {
		t.Errorf("%d of %d proofs failed, the first: %v", failed.Load(), ok.Load()+failed.Load(), firstErr.Load())
	}
	t.Logf("proofs: %d in %s through the balancer from both replicas, %d clients: %.0f proofs/s", ok.Load(), el.Round(time.Millisecond), clients, float64(ok.Load())/el.Seconds())
}
