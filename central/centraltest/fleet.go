// Package centraltest builds what tests of the central plane need: a fleet
// CA with appliances, tenants' trees of leaves with signed heads, and a
// running central plane on loopback with clients for it.
package centraltest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Fleet is a fleet CA that issues appliance certificates.
type Fleet struct {
	CA *fleet.CA
}

// NewFleet makes a fleet CA whose certificates are valid from two days
// ago, so that tests can sign heads of yesterday.
func NewFleet(tb testing.TB) *Fleet {
	tb.Helper()
	issued := time.Now().AddDate(0, 0, -2)
	ca, err := fleet.NewCA("test fleet CA", issued)
	if err != nil {
		tb.Fatal(err)
	}
	ca.Now = func() time.Time { return issued }
	return &Fleet{CA: ca}
}

// Appliance issues a certificate for id with a key of the default kind
// (Ed25519).
func (f *Fleet) Appliance(tb testing.TB, id string) *fleet.Appliance {
	tb.Helper()
	return f.ApplianceKind(tb, id, fleet.DefaultKeyKind)
}

// ApplianceKind issues a certificate for id with a key of kind.
func (f *Fleet) ApplianceKind(tb testing.TB, id string, kind fleet.KeyKind) *fleet.Appliance {
	tb.Helper()
	certPEM, keyPEM, err := fleet.IssueApplianceKind(f.CA, id, kind)
	if err != nil {
		tb.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return app
}

// Tree is a tenant's tree of one appliance and day, built leaf by leaf.
type Tree struct {
	Tenant string
	App    *fleet.Appliance
	Day    string
	Leaves []store.Leaf
	// Canonical holds each leaf's canonical event bytes (nil for AddFast).
	Canonical [][]byte
	seq       uint64
	rng       *compact.Range // over all of Leaves
}

var ranges = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// NewTree starts an empty tree of tenant on app for today (UTC).
func NewTree(tenant string, app *fleet.Appliance) *Tree {
	return &Tree{Tenant: tenant, App: app, Day: ids.Day(time.Now())}
}

// Add appends n leaves of real canonical events (their bytes in Canonical);
// sequences skip one number in two, as if another tenant's events
// interleaved.
func (t *Tree) Add(n int) []store.Leaf {
	return t.add(n, true)
}

// AddFast appends n leaves with random leaf hashes and no canonical bytes,
// for large trees: they are uploaded with their hashes alone, as an
// appliance that predates canonical leaves on the wire sends them.
func (t *Tree) AddFast(n int) []store.Leaf {
	return t.add(n, false)
}

func (t *Tree) add(n int, canonical bool) []store.Leaf {
	added := make([]store.Leaf, 0, n)
	for range n {
		t.seq += 2
		rnd := make([]byte, 32)
		_, _ = rand.Read(rnd)
		l := store.Leaf{
			RequestID: fmt.Sprintf("req_%s%d", hex.EncodeToString(rnd[:8]), t.seq),
			Sequence:  t.seq, LeafIndex: uint64(len(t.Leaves)), LeafHash: rfc6962.DefaultHasher.HashLeaf(rnd),
		}
		var canon []byte
		if canonical {
			canon = t.canonical(l)
			l.LeafHash, l.Leaf = leaf.Hash(canon), canon
		}
		if t.rng == nil {
			t.rng = ranges.NewEmptyRange(0)
		}
		_ = t.rng.Append(l.LeafHash, nil)
		t.Leaves = append(t.Leaves, l)
		t.Canonical = append(t.Canonical, canon)
		added = append(added, l)
	}
	return added
}

// canonical returns the canonical bytes of an event leaf for l.
func (t *Tree) canonical(l store.Leaf) []byte {
	salt, _ := leaf.NewSalt(rand.Reader)
	b, err := leaf.Canonical(leaf.Leaf{
		Schema: leaf.Schema, RequestID: l.RequestID, Sequence: l.Sequence, TenantID: t.Tenant, ApplianceID: t.App.ID,
		KeyID: "key_test", Time: leaf.FormatTime(time.Now()), Endpoint: "/v1/chat/completions", Model: "builtin/echo",
		Status: 200, PromptTokens: 3, CompletionTokens: 5,
		RequestSHA256: leaf.BodyHash([]byte(`{"q":1}`)), ResponseSHA256: leaf.BodyHash([]byte(`{"a":2}`)), Salt: salt,
	})
	if err != nil {
		panic(err) // the fields above are valid
	}
	return b
}

// Head signs a head of the tree as it is now, at at.
func (t *Tree) Head(tb testing.TB, at time.Time) head.Head {
	tb.Helper()
	return t.HeadAt(tb, len(t.Leaves), at)
}

// HeadAt signs a head of the tree's first size leaves, at at.
func (t *Tree) HeadAt(tb testing.TB, size int, at time.Time) head.Head {
	tb.Helper()
	var last uint64
	root := head.EmptyRoot()
	if size > 0 {
		last = t.Leaves[size-1].Sequence
		rng := t.rng
		if size < len(t.Leaves) {
			rng = ranges.NewEmptyRange(0)
			for _, l := range t.Leaves[:size] {
				_ = rng.Append(l.LeafHash, nil)
			}
		}
		r, _ := rng.GetRootHash(nil)
		root = hex.EncodeToString(r)
	}
	h, err := head.Sign(head.Head{
		TenantID: t.Tenant, Day: t.Day, EventCount: uint64(size), LastSequence: last, MerkleRoot: root,
	}, t.App, at)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// Upload is a signed head of the tree now with its leaves from index from.
func (t *Tree) Upload(tb testing.TB, from uint64) ingest.Upload {
	tb.Helper()
	return ingest.Upload{
		Head:              t.Head(tb, time.Now()),
		FirstLeafIndex:    from,
		Leaves:            append([]store.Leaf(nil), t.Leaves[from:]...),
		LeafRetentionDays: 90,
	}
}

// SignOutsideValidity signs h as app at at like head.Sign, but without
// refusing an instant outside the certificate's validity: a head that
// central must refuse.
func SignOutsideValidity(tb testing.TB, h head.Head, app *fleet.Appliance, at time.Time) head.Head {
	tb.Helper()
	h.ApplianceID, h.SignedAt, h.Certificate = app.ID, head.FormatSignedAt(at), string(app.CertPEM)
	body, err := head.Body(h)
	if err != nil {
		tb.Fatal(err)
	}
	sig, err := app.Sign(body)
	if err != nil {
		tb.Fatal(err)
	}
	h.Signature = base64.StdEncoding.EncodeToString(sig)
	return h
}
