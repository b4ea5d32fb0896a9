package store

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// ErrForkLimit: the tree already holds the most forks a store keeps of
// it (RecordFork's bound); nothing was recorded.
var ErrForkLimit = errors.New("store: the tree holds the most forks kept of it")

// DefaultMaxForksPerTree bounds the forks kept of one tree, so that an
// appliance (or whoever holds its key) that signs head after forked head
// cannot fill the store: each record holds two heads and a consistency
// proof (at most 64 hashes), some 40 KiB at most with 16 KiB
// certificates, so a full tree holds some 40 MiB.
const DefaultMaxForksPerTree = 1000

// Fork is the evidence of a fork: a signed head refused as inconsistent
// with its stored tree, and the stored head it contradicts. Both are
// signed by the appliance's key, for the same tenant, appliance and day.
type Fork struct {
	// Number is set by the store: a tenant's forks are numbered 0, 1, ...
	// in the order recorded, and a number is never reused, not even once
	// retention has deleted the fork.
	Number uint64
	// Head is the refused head, as received.
	Head head.Head
	// Stored is the stored head it contradicts: of its size, or the
	// latest stored head when StoredRoot was rebuilt from the stored
	// nodes (FromNodes).
	Stored head.Head
	// StoredRoot is the stored tree's root at Head.EventCount leaves.
	StoredRoot string
	FromNodes  bool
	// ConsistencyProof, when FromNodes, is the RFC 6962 consistency proof
	// from StoredRoot at Head.EventCount leaves to Stored (none when
	// Head.EventCount is 0), so that the fork is proven by the record
	// alone, once the nodes StoredRoot was rebuilt from are pruned: the
	// signed Stored commits, through it, to a tree whose first
	// Head.EventCount leaves have StoredRoot, not Head's root. Empty when
	// not FromNodes.
	ConsistencyProof [][]byte
	// ReceivedAt is when the refused head arrived.
	ReceivedAt time.Time
}

// Tree is the tree the fork is of.
func (f Fork) Tree() TreeID { return TreeOf(f.Head) }

// ForkQuery selects a tenant's forks (Store.Forks).
type ForkQuery struct {
	// ApplianceID and Day, when not empty, keep only the forks of that
	// appliance, of that day.
	ApplianceID, Day string
	// From is the first number listed: forks numbered below it are not.
	From uint64
	// Limit bounds how many are returned (no bound when <= 0).
	Limit int
}

// Selects reports whether the forks of tree id are among those q selects,
// their numbers aside.
func (q ForkQuery) Selects(id TreeID) bool {
	return (q.ApplianceID == "" || q.ApplianceID == id.ApplianceID) && (q.Day == "" || q.Day == id.Day)
}

// ForkDigest is the SHA-256 of a fork's refused head document (its JSON,
// signature and certificate included), which a store keeps once per
// tree, and the document itself.
func ForkDigest(h head.Head) ([32]byte, []byte, error) {
	raw, err := json.Marshal(h)
	if err != nil {
		return [32]byte{}, nil, fmt.Errorf("store: marshal the forked head: %w", err)
	}
	return sha256.Sum256(raw), raw, nil
}
