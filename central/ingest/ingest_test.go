package ingest_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
)

type fixture struct {
	fleet *centraltest.Fleet
	st    store.Store
	in    *ingest.Ingester
	tree  *centraltest.Tree
	logs  bytes.Buffer // the ingester's log, JSON lines
	// wrapped is the store the ingester was given (st, or st wrapped),
	// logger the ingester's, writing to logs.
	wrapped store.Store
	logger  *slog.Logger
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the ingester's store wrapped by wrap.
func setupWith(t *testing.T, wrap func(store.Store) store.Store) *fixture {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return setupOn(t, st, wrap)
}

// setupOn is setupWith on the store st.
func setupOn(t *testing.T, st store.Store, wrap func(store.Store) store.Store) *fixture {
	t.Helper()
	f := &fixture{fleet: centraltest.NewFleet(t)}
	f.st = st
	var err error
	in := st
	if wrap != nil {
		in = wrap(st)
	}
	f.wrapped = in
	f.logger = slog.New(slog.NewJSONHandler(&f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if f.in, err = ingest.New(ingest.Options{CA: f.fleet.CA.Cert, Store: in, Logger: f.logger}); err != nil {
		t.Fatal(err)
	}
	f.tree = centraltest.NewTree("acme", f.fleet.Appliance(t, "app_one"))
	return f
}

// withKeyKind gives the fixture's tree, still empty, an appliance of the
// same id whose key is of kind.
func (f *fixture) withKeyKind(t *testing.T, kind fleet.KeyKind) {
	t.Helper()
	f.tree = centraltest.NewTree(f.tree.Tenant, f.fleet.ApplianceKind(t, f.tree.App.ID, kind))
}

func (f *fixture) publish(t *testing.T, u ingest.Upload) (ingest.Result, error) {
	t.Helper()
	return f.in.Publish(context.Background(), u.Head.ApplianceID, u)
}

// snapshot is everything stored of the fixture's tree.
func (f *fixture) snapshot(t *testing.T) []any {
	t.Helper()
	id := store.TreeID{TenantID: f.tree.Tenant, ApplianceID: f.tree.App.ID, Day: f.tree.Day}
	tr, err := f.st.Tree(context.Background(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	heads, _ := f.st.Heads(context.Background(), id)
	leaves, _ := f.st.Leaves(context.Background(), id, 0, 1<<20)
	return []any{tr, heads, leaves}
}

// TestPublishGrowsTree runs with an appliance of each key kind: Ed25519,
// the default, and ECDSA P-256, as appliances issued before it hold.
func TestPublishGrowsTree(t *testing.T) {
	for _, kind := range []fleet.KeyKind{fleet.Ed25519, fleet.ECDSAP256} {
		t.Run(string(kind), func(t *testing.T) { testPublishGrowsTree(t, kind) })
	}
}

func testPublishGrowsTree(t *testing.T, kind fleet.KeyKind) {
	f := setup(t)
	f.withKeyKind(t, kind)
	f.tree.Add(3)
	res, err := f.publish(t, f.tree.Upload(t, 0))
	if err != nil || res.EventCount != 3 || res.Duplicate {
		t.Fatalf("first head: %+v, %v", res, err)
	}
	// 0: a head signed again at the same size, accepted as a duplicate
	// and not stored (TestSameSizeHeads).
	for _, n := range []int{1, 5, 0, 8} {
		f.tree.Add(n)
		from := uint64(len(f.tree.Leaves) - n)
		if res, err = f.publish(t, f.tree.Upload(t, from)); err != nil || res.EventCount != uint64(len(f.tree.Leaves)) || res.Duplicate != (n == 0) {
			t.Fatalf("after %d more: %+v, %v", n, res, err)
		}
	}
	heads, err := f.st.Heads(context.Background(), store.TreeOf(f.tree.Head(t, time.Now())))
	if err != nil || len(heads) != 4 || heads[3].EventCount != 17 {
		t.Fatalf("stored heads: %d, %v", len(heads), err)
	}
	// Every leaf is provable against the latest head.
	for _, l := range f.tree.Leaves {
		p, err := f.st.Proof(context.Background(), store.TreeOf(heads[3]), l.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		root, _ := p.Head.Root()
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Leaf.LeafIndex, p.Head.EventCount, p.Leaf.LeafHash, p.Hashes, root); err != nil {
			t.Fatalf("leaf %d: %v", l.LeafIndex, err)
		}
	}
}

func TestPublishIdempotentAndOverlap(t *testing.T) {
	f := setup(t)
	f.tree.Add(4)
	u := f.tree.Upload(t, 0)
	if _, err := f.publish(t, u); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	res, err := f.publish(t, u)
	if err != nil || !res.Duplicate || res.EventCount != 4 {
		t.Fatalf("resend: %+v, %v", res, err)
	}
	if !reflect.DeepEqual(before, f.snapshot(t)) {
		t.Fatal("a resent head changed the store")
	}
	// A later head with all its leaves again (an appliance that lost its
	// queue): the overlap is checked and skipped.
	f.tree.Add(2)
	if res, err = f.publish(t, f.tree.Upload(t, 1)); err != nil || res.EventCount != 6 {
		t.Fatalf("overlapping upload: %+v, %v", res, err)
	}
}

// TestRefusals: every way a head can be wrong is refused with its reason,
// and nothing stored changes.
func TestRefusals(t *testing.T) {
	f := setup(t)
	f.tree.Add(3)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	stranger := centraltest.NewFleet(t).Appliance(t, "app_one")
	other := f.fleet.Appliance(t, "app_two")
	// The fleet's certificates are valid from two days ago: a tree of three
	// days ago, signed then, was signed before its certificate was valid.
	early := centraltest.NewTree("acme", f.tree.App)
	early.Day = time.Now().UTC().AddDate(0, 0, -3).Format("2006-01-02")
	early.Add(1)
	f.tree.Add(2)
	good := func() ingest.Upload { return f.tree.Upload(t, 3) }
	cases := []struct {
		name   string
		upload func() ingest.Upload
		peer   string
		reason string
		class  ingest.Class
	}{
		{"tampered root", func() ingest.Upload {
			u := good()
			r := []byte(u.Head.MerkleRoot)
			r[10] = "01"[(r[10]+1)%2]
			u.Head.MerkleRoot = string(r)
			return u
		}, "", ingest.ReasonSignature, ingest.Invalid},
		{"tampered count", func() ingest.Upload { u := good(); u.Head.EventCount--; u.Leaves = u.Leaves[:1]; return u }, "", ingest.ReasonSignature, ingest.Invalid},
		{"certificate of another CA", func() ingest.Upload {
			tr := *f.tree
			tr.App = stranger
			return tr.Upload(t, 3)
		}, "", ingest.ReasonCertificate, ingest.Invalid},
		{"certificate not valid at signed_at", func() ingest.Upload {
			dayStart, _ := time.Parse("2006-01-02", early.Day)
			h := head.Head{TenantID: early.Tenant, Day: early.Day, EventCount: 1, LastSequence: early.Leaves[0].Sequence,
				MerkleRoot: hex.EncodeToString(early.Leaves[0].LeafHash)}
			h = centraltest.SignOutsideValidity(t, h, early.App, dayStart.Add(12*time.Hour))
			return ingest.Upload{Head: h, Leaves: early.Leaves, LeafRetentionDays: 90}
		}, "", ingest.ReasonCertificate, ingest.Invalid},
		{"certificate of another appliance", func() ingest.Upload {
			u := good()
			u.Head.Certificate = string(other.CertPEM)
			return u
		}, "", ingest.ReasonApplianceMismatch, ingest.Invalid},
		{"published by another appliance", good, other.ID, ingest.ReasonApplianceMismatch, ingest.Denied},
		// Leaves sent with their hash alone (an appliance that predates
		// canonical leaves on the wire) meet the checks that follow.
		{"leaves do not rebuild the root", func() ingest.Upload {
			u := good()
			u.Leaves[1].LeafHash, u.Leaves[1].Leaf = append([]byte(nil), u.Leaves[0].LeafHash...), nil
			return u
		}, "", ingest.ReasonRootMismatch, ingest.Invalid},
		{"leaf bytes of another hash", func() ingest.Upload {
			u := good()
			u.Leaves[1].Leaf = u.Leaves[0].Leaf
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf names another request id", func() ingest.Upload {
			u := good()
			u.Leaves[1].RequestID = "req_forged"
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf names another sequence", func() ingest.Upload {
			u := good()
			u.Leaves[0].Sequence--
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf of another tenant", func() ingest.Upload {
			u := good()
			u.Leaves[1] = relabel(t, u.Leaves[1], func(l *leaf.Leaf) { l.TenantID = "beta" })
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf of another appliance", func() ingest.Upload {
			u := good()
			u.Leaves[1] = relabel(t, u.Leaves[1], func(l *leaf.Leaf) { l.ApplianceID = "app_two" })
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf not canonical", func() ingest.Upload {
			u := good()
			u.Leaves[1].Leaf = append([]byte(" "), u.Leaves[1].Leaf...)
			u.Leaves[1].LeafHash = leaf.Hash(u.Leaves[1].Leaf)
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf missing", func() ingest.Upload { u := good(); u.Leaves = u.Leaves[:1]; return u }, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"leaf gap", func() ingest.Upload { u := f.tree.Upload(t, 4); return u }, "", ingest.ReasonLeafGap, ingest.Precondition},
		{"overlap differs", func() ingest.Upload {
			u := f.tree.Upload(t, 2)
			u.Leaves[0].RequestID, u.Leaves[0].Leaf = "req_forged", nil
			return u
		}, "", ingest.ReasonLeafMismatch, ingest.Invalid},
		{"duplicate request id", func() ingest.Upload {
			u := good()
			u.Leaves[1].RequestID, u.Leaves[1].Leaf = u.Leaves[0].RequestID, nil
			return u
		}, "", ingest.ReasonDuplicateRequestID, ingest.Invalid},
		{"request id already stored", func() ingest.Upload {
			u := good()
			u.Leaves[0].RequestID, u.Leaves[0].Leaf = f.tree.Leaves[0].RequestID, nil
			return u
		}, "", ingest.ReasonDuplicateRequestID, ingest.Invalid},
		{"sequence not after stored", func() ingest.Upload {
			u := good()
			u.Leaves[0].Sequence = f.tree.Leaves[2].Sequence
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"signed in the future", func() ingest.Upload {
			u := good()
			h, err := head.Sign(u.Head, f.tree.App, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			u.Head = h
			return u
		}, "", ingest.ReasonFromFuture, ingest.Invalid},
		{"same size, larger last_sequence", func() ingest.Upload {
			h := f.tree.HeadAt(t, 3, time.Now())
			h.LastSequence += 5
			h, err := head.Sign(h, f.tree.App, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return ingest.Upload{Head: h, FirstLeafIndex: 3, LeafRetentionDays: 90}
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		// Not stale (which the forwarder drops as superseded): no
		// appliance's tree grows while its last sequence goes back.
		{"larger, last_sequence behind the stored", func() ingest.Upload {
			u := good()
			u.Head.LastSequence = f.tree.Leaves[2].Sequence - 1
			h, err := head.Sign(u.Head, f.tree.App, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			u.Head = h
			return u
		}, "", ingest.ReasonInvalidLeaves, ingest.Invalid},
		{"stale head", func() ingest.Upload {
			return ingest.Upload{Head: f.tree.HeadAt(t, 2, time.Now()), FirstLeafIndex: 2, LeafRetentionDays: 90}
		}, "", ingest.ReasonStaleHead, ingest.Precondition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.snapshot(t)
			u := c.upload()
			peer := c.peer
			if peer == "" {
				peer = u.Head.ApplianceID
			}
			f.logs.Reset()
			_, err := f.in.Publish(context.Background(), peer, u)
			r, ok := ingest.AsRefusal(err)
			if !ok || r.Reason != c.reason || r.Class != c.class {
				t.Fatalf("got %v, want a refusal %s", err, c.reason)
			}
			if !reflect.DeepEqual(before, f.snapshot(t)) {
				t.Fatal("a refused head changed the store")
			}
			// Logged as a warning naming the appliance, the tree and the reason.
			var line struct {
				Level, Msg, Reason, Err string
				ApplianceID             string `json:"appliance_id"`
				Tree                    string
			}
			if err := json.Unmarshal(f.logs.Bytes(), &line); err != nil || line.Level != "WARN" || line.Msg != "central: head refused" ||
				line.Reason != c.reason || line.ApplianceID != peer || line.Tree != store.TreeOf(u.Head).String() || line.Err == "" {
				t.Fatalf("log of the refusal: %s (%v)", f.logs.Bytes(), err)
			}
		})
	}
	if _, err := f.publish(t, good()); err != nil {
		t.Fatalf("the good head after the refusals: %v", err)
	}
}

// TestFork: a head of the same size with another root, or a larger head
// whose tree does not extend the stored one, is inconsistent.
func TestFork(t *testing.T) {
	f := setup(t)
	f.tree.Add(5)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	fork := centraltest.NewTree("acme", f.tree.App)
	fork.Add(7)
	u := fork.Upload(t, 5)
	_, err := f.publish(t, u)
	if r, ok := ingest.AsRefusal(err); !ok || (r.Reason != ingest.ReasonInvalidLeaves && r.Reason != ingest.ReasonRootMismatch) {
		t.Fatalf("fork with new leaves only: %v", err)
	}
	u = fork.Upload(t, 0)
	_, err = f.publish(t, u)
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonLeafMismatch {
		t.Fatalf("fork with all leaves: %v", err)
	}
	// Same size, another root: the appliance signed two heads of the tree
	// that disagree.
	same := centraltest.NewTree("acme", f.tree.App)
	same.Add(5)
	_, err = f.publish(t, same.Upload(t, 5))
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonInconsistent {
		t.Fatalf("fork of the same size: %v", err)
	}
	if tr, _ := f.st.Tree(context.Background(), store.TreeOf(f.tree.Head(t, time.Now()))); tr.Heads != 1 {
		t.Fatalf("the forks changed the tree: %+v", tr)
	}
}

// TestFinalTree: once a final head is stored (signed after its day), the
// tree takes no other head.
func TestFinalTree(t *testing.T) {
	f := setup(t)
	f.tree.Day = time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
	f.tree.Add(2)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	f.tree.Add(1)
	_, err := f.publish(t, f.tree.Upload(t, 2))
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonTreeFinal || r.Class != ingest.Precondition {
		t.Fatalf("after a final head: %v", err)
	}
}

// relabel returns l with its canonical leaf changed by edit, and the leaf
// hash of the new bytes.
func relabel(t *testing.T, l store.Leaf, edit func(*leaf.Leaf)) store.Leaf {
	t.Helper()
	lf, err := leaf.Parse(l.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	edit(&lf)
	if l.Leaf, err = leaf.Canonical(lf); err != nil {
		t.Fatal(err)
	}
	l.LeafHash = leaf.Hash(l.Leaf)
	return l
}

// pruningStore applies retention as of at, when set, just before each
// commit: the prune wins the race with an upload verified against the
// tree as it was read. With legacyDays set, it commits with that leaf
// retention instead of ingest's, as a plane that pruned leaves at the
// appliance's body retention did: only such trees' leaves are pruned
// before their heads.
type pruningStore struct {
	store.Store
	at         time.Time
	legacyDays int
}

func (p *pruningStore) Commit(ctx context.Context, c store.Commit) error {
	if !p.at.IsZero() {
		if _, err := p.Prune(ctx, p.at); err != nil {
			return err
		}
	}
	if p.legacyDays > 0 {
		c.LeafRetentionDays = p.legacyDays
	}
	return p.Store.Commit(ctx, c)
}

// TestPrunedWhileVerified: a head verified against a tree whose leaves
// are pruned before it is committed is refused (leaves_pruned), as it is
// when the tree is read pruned, and nothing of it is stored.
func TestPrunedWhileVerified(t *testing.T) {
	ps := &pruningStore{legacyDays: 90}
	f := setupWith(t, func(s store.Store) store.Store { ps.Store = s; return ps })
	f.tree.Add(2)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	ps.legacyDays = 0
	ps.at, _ = store.LeavesExpire(f.tree.Day, 90)
	f.tree.Add(3)
	_, err := f.publish(t, f.tree.Upload(t, 2))
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonLeavesPruned || r.Class != ingest.Precondition || r.StoredEventCount != 2 {
		t.Fatalf("a head whose tree was pruned before its commit: %v, want a refusal leaves_pruned", err)
	}
	id := store.TreeOf(f.tree.Head(t, time.Now()))
	tr, err := f.st.Tree(context.Background(), id)
	if want := before[0].(store.Tree); err != nil || tr.Heads != want.Heads || tr.Head != want.Head || !tr.LeavesPruned {
		t.Fatalf("tree after the refusal: %+v, %v; want %+v, pruned", tr, err, want)
	}
}
