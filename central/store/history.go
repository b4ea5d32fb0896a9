package store

import (
	"fmt"

	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// LatestSize, as the larger size of Store.Consistency, is the size of the
// tree's latest head.
const LatestSize = ^uint64(0)

// Consistency is what a consistency proof between two stored heads of a
// tree needs, read in one transaction: the heads and the RFC 6962
// consistency proof from the tree at From.EventCount leaves to the tree
// at To.EventCount.
type Consistency struct {
	// From is the first stored head of the smaller size.
	From head.Head
	// To is the latest stored head of the larger size.
	To     head.Head
	Hashes [][]byte
}

// SizeError is a size of Store.Consistency of which the tree holds no
// head: above the latest head's (Beyond), or between the sizes of two
// stored heads.
type SizeError struct {
	// Size is the size asked for.
	Size uint64
	// Latest is the tree's latest head's size.
	Latest uint64
}

func (e *SizeError) Error() string {
	if e.Beyond() {
		return fmt.Sprintf("store: size %d is above the latest head's, %d", e.Size, e.Latest)
	}
	return fmt.Sprintf("store: no head of size %d is stored", e.Size)
}

// Beyond reports whether Size is above the latest head's size: the tree
// may reach it later.
func (e *SizeError) Beyond() bool { return e.Size > e.Latest }

// ReadConsistency builds a Consistency between the sizes from and to (to
// at least from; LatestSize: the latest head's) of a tree that holds
// heads stored heads, latest being the last, and whose leaves are pruned
// when pruned. at reads the n-th stored head and nodes the hashes of
// stored nodes; implementations call it inside their read transaction.
//
// The stored heads grow in commit order (each extends the one before,
// and only the day's final head may have its predecessor's size), so the
// heads of a size are found by bisection: some log2(heads) reads, never
// every head. Nodes are read only when the proof has hashes (from is
// neither 0 nor to): a proof without any is served after the leaves are
// pruned too.
func ReadConsistency(latest head.Head, heads int, pruned bool, from, to uint64,
	at func(n int) (head.Head, error), nodes func([]compact.NodeID) ([][]byte, error)) (Consistency, error) {
	if to == LatestSize {
		to = latest.EventCount
	}
	for _, size := range []uint64{from, to} {
		if size > latest.EventCount {
			return Consistency{}, &SizeError{Size: size, Latest: latest.EventCount}
		}
	}
	if from > to {
		return Consistency{}, fmt.Errorf("store: consistency from %d to %d leaves", from, to)
	}
	out := Consistency{To: latest}
	if to < latest.EventCount {
		// The last head of to's size: the one before the first larger.
		n, err := firstAbove(heads-1, to, at)
		if err != nil {
			return Consistency{}, err
		}
		if n == 0 {
			return Consistency{}, &SizeError{Size: to, Latest: latest.EventCount}
		}
		if out.To, err = at(n - 1); err != nil {
			return Consistency{}, err
		}
		if out.To.EventCount != to {
			return Consistency{}, &SizeError{Size: to, Latest: latest.EventCount}
		}
	}
	// The first head of from's size: the one after the last smaller.
	n, err := firstAbove(heads-1, from-1, at)
	if from == 0 {
		n, err = 0, nil
	}
	if err != nil {
		return Consistency{}, err
	}
	if n == heads-1 {
		out.From = latest
	} else if out.From, err = at(n); err != nil {
		return Consistency{}, err
	}
	if out.From.EventCount != from {
		return Consistency{}, &SizeError{Size: from, Latest: latest.EventCount}
	}
	if from == 0 || from == to {
		return out, nil
	}
	if pruned {
		return Consistency{}, ErrPruned
	}
	if out.Hashes, err = ConsistencyHashes(from, to, nodes); err != nil {
		return Consistency{}, err
	}
	return out, nil
}

// firstAbove returns the number of the first of the heads numbered below
// n whose size is above size (n when none is), by bisection.
func firstAbove(n int, size uint64, at func(int) (head.Head, error)) (int, error) {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		h, err := at(mid)
		if err != nil {
			return 0, err
		}
		if h.EventCount > size {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
