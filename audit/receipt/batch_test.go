package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// mth is RFC 6962's MTH, written from its definition (RFC 9162, 2.1.1).
func mth(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return rfc6962.DefaultHasher.HashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

// TestTreeIsRFC6962: the batch tree's root is RFC 6962's and every path
// verifies with transparency-dev/merkle, for every size up to 70.
func TestTreeIsRFC6962(t *testing.T) {
	for n := 1; n <= 70; n++ {
		leaves := make([][]byte, n)
		for i := range leaves {
			h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
			leaves[i] = h[:]
		}
		tr := NewTree(leaves)
		if !bytes.Equal(tr.Root(), mth(leaves)) {
			t.Fatalf("size %d: root differs from RFC 6962's", n)
		}
		for i := range leaves {
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), uint64(n), leaves[i], tr.Path(uint64(i)), tr.Root()); err != nil {
				t.Fatalf("size %d, leaf %d: %v", n, i, err)
			}
		}
	}
}
