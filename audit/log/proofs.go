package log

import (
	"errors"
	"fmt"
	"sort"

	"github.com/transparency-dev/merkle/proof"
	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// InclusionProof is a self-contained proof that an event is in a signed
// head: verify Head with head.Verify, then the rest with
// head.VerifyInclusion(Head, Leaf, LeafIndex, Hashes).
type InclusionProof struct {
	Head      head.Head
	LeafIndex uint64
	// Leaf is the event's canonical leaf; LeafHash its RFC 6962 hash.
	Leaf     []byte
	LeafHash []byte
	// Hashes is the RFC 6962 inclusion proof, from the leaf up.
	Hashes [][]byte
}

// InclusionProof proves that the event of requestID is in the tree of
// tenant and day as of a signed head: the latest when treeSize is 0, else
// the head whose event_count is treeSize. It fails with ErrNotFound when the
// event is not in that tree, and ErrNotCovered when the head predates it.
func (l *Log) InclusionProof(tenant, day, requestID string, treeSize uint64) (InclusionProof, error) {
	if err := checkTree(tenant, day); err != nil {
		return InclusionProof{}, err
	}
	if err := l.apply.caughtUp(); err != nil {
		return InclusionProof{}, err
	}
	var out InclusionProof
	err := l.db.View(func(tx *bolt.Tx) error {
		// An unknown event and one of another tree (another tenant's)
		// are the same error, message included.
		r, _, err := readEvent(tx, requestID)
		if errors.Is(err, ErrNotFound) || err == nil && (r.Day != day || r.Leaf.TenantID != tenant) {
			return fmt.Errorf("%w: no event %s in the tree of %s/%s", ErrNotFound, requestID, day, tenant)
		}
		if err != nil {
			return err
		}
		h, err := headOfSize(tx, day, tenant, treeSize)
		if err != nil {
			return err
		}
		if r.LeafIndex >= h.EventCount {
			return fmt.Errorf("%w: leaf %d, latest head has %d", ErrNotCovered, r.LeafIndex, h.EventCount)
		}
		nodes, err := proof.Inclusion(r.LeafIndex, h.EventCount)
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		hashes, err := proofHashes(tx, day, tenant, nodes)
		if err != nil {
			return err
		}
		out = InclusionProof{Head: h, LeafIndex: r.LeafIndex, Leaf: r.LeafBytes, LeafHash: r.LeafHash, Hashes: hashes}
		return nil
	})
	if err != nil {
		return InclusionProof{}, err
	}
	// The store proves what it serves: a failure here is corruption.
	if err := head.VerifyInclusion(out.Head, out.Leaf, out.LeafIndex, out.Hashes); err != nil {
		return InclusionProof{}, fmt.Errorf("audit log: stored tree of %s/%s is inconsistent: %w", day, tenant, err)
	}
	return out, nil
}

// ConsistencyProof proves that the tree of tenant and day at size2 extends
// itself at size1 (RFC 6962), for 0 < size1 <= size2 <= the tree's size.
func (l *Log) ConsistencyProof(tenant, day string, size1, size2 uint64) ([][]byte, error) {
	if err := checkTree(tenant, day); err != nil {
		return nil, err
	}
	if size1 == 0 || size1 > size2 {
		return nil, fmt.Errorf("%w: consistency proof needs 0 < size1 <= size2, got %d, %d", ErrInvalid, size1, size2)
	}
	var out [][]byte
	err := l.db.View(func(tx *bolt.Tx) error {
		t, err := loadTree(tx, day, tenant)
		if err != nil {
			return err
		}
		if size2 > t.size {
			return fmt.Errorf("%w: tree %s/%s has %d leaves, not %d", ErrNotFound, day, tenant, t.size, size2)
		}
		nodes, err := proof.Consistency(size1, size2)
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		out, err = proofHashes(tx, day, tenant, nodes)
		return err
	})
	return out, err
}

// headOfSize returns the latest head (size 0, or the latest's size) or
// else the first head of a given size. A tree's heads are numbered from 0 in the order signed, and their
// sizes never decrease, so the head of a size is found by binary search:
// a day can hold tens of thousands of heads.
func headOfSize(tx *bolt.Tx, day, tenant string, size uint64) (head.Head, error) {
	n, last, ok, err := lastHead(tx, day, tenant)
	if err != nil {
		return head.Head{}, err
	}
	if !ok {
		return head.Head{}, fmt.Errorf("%w: no signed head of %s/%s yet", ErrNotCovered, day, tenant)
	}
	if size == 0 || last.EventCount == size {
		return last, nil // a final head repeating its predecessor's size wins
	}
	b := tx.Bucket(bucketHeads)
	read := func(i int) (head.Head, error) { return decodeHead(b.Get(headKey(day, tenant, uint64(i)))) }
	var readErr error
	i := sort.Search(int(n)+1, func(i int) bool {
		h, err := read(i)
		if err != nil {
			readErr = err
			return true
		}
		return h.EventCount >= size
	})
	if readErr != nil {
		return head.Head{}, readErr
	}
	if i <= int(n) {
		h, err := read(i)
		if err != nil || h.EventCount == size {
			return h, err
		}
	}
	return head.Head{}, fmt.Errorf("%w: no head of %s/%s with %d events", ErrNotFound, day, tenant, size)
}
