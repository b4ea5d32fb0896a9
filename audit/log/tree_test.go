package log

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/testonly"
	bolt "go.etcd.io/bbolt"
)

// Inclusion and consistency proof vectors for the tree of
// testonly.LeafInputs(), copied from the transparency-dev/merkle module,
// proof/verify_test.go (inclusionProofs and consistencyProofs; leaf
// indices there are 1-based, here 0-based). The module ships them only as
// test code; its leaf inputs and root hashes come from the importable
// package testonly (testonly/constants.go) and are used directly.
var (
	inclusionVectors = []struct {
		index, size uint64
		proof       []string
	}{
		{0, 1, nil},
		{0, 8, []string{
			"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
		}},
		{5, 8, []string{
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
			"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		}},
		{2, 3, []string{
			"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		}},
		{1, 5, []string{
			"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		}},
	}
	consistencyVectors = []struct {
		size1, size2 uint64
		proof        []string
	}{
		{1, 1, nil},
		{1, 8, []string{
			"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
		}},
		{6, 8, []string{
			"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
			"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		}},
		{2, 5, []string{
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		}},
		{6, 7, []string{
			"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
			"b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		}},
	}
)

// TestRFC6962Vectors builds the tree of the module's RFC 6962 test leaves
// with the log's own tree code (compact range, stored nodes, state encoded
// and decoded at every size) and checks roots and proofs against the
// published vectors.
func TestRFC6962Vectors(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	roots := testonly.RootHashes()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		for size, input := range append([][]byte{nil}, testonly.LeafInputs()...) {
			tr, err := loadTree(tx, "2026-03-01", "vectors")
			if err != nil {
				return err
			}
			if size > 0 {
				var putErr error
				put := func(k, v []byte) {
					if putErr == nil {
						putErr = tx.Bucket(bucketNodes).Put(k, v)
					}
				}
				if err := tr.append(put, hasher.HashLeaf(input)); err != nil {
					return err
				}
				if putErr != nil {
					return putErr
				}
				if err := tx.Bucket(bucketTrees).Put(treeKey("2026-03-01", "vectors"), tr.encode()); err != nil {
					return err
				}
			}
			root, err := tr.root()
			if err != nil {
				return err
			}
			if !bytes.Equal(root, roots[size]) {
				t.Errorf("root of size %d = %x, want %x", size, root, roots[size])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, v := range inclusionVectors {
			nodes, err := proof.Inclusion(v.index, v.size)
			if err != nil {
				return err
			}
			got, err := proofHashes(tx, "2026-03-01", "vectors", nodes)
			if err != nil {
				return err
			}
			checkProof(t, "inclusion", got, v.proof)
			leafHash := hasher.HashLeaf(testonly.LeafInputs()[v.index])
			if err := proof.VerifyInclusion(hasher, v.index, v.size, leafHash, got, roots[v.size]); err != nil {
				t.Errorf("VerifyInclusion(%d, %d): %v", v.index, v.size, err)
			}
		}
		for _, v := range consistencyVectors {
			nodes, err := proof.Consistency(v.size1, v.size2)
			if err != nil {
				return err
			}
			got, err := proofHashes(tx, "2026-03-01", "vectors", nodes)
			if err != nil {
				return err
			}
			checkProof(t, "consistency", got, v.proof)
			if err := proof.VerifyConsistency(hasher, v.size1, v.size2, got, roots[v.size1], roots[v.size2]); err != nil {
				t.Errorf("VerifyConsistency(%d, %d): %v", v.size1, v.size2, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkProof(t *testing.T, kind string, got [][]byte, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s proof has %d hashes, want %d", kind, len(got), len(want))
		return
	}
	for i := range got {
		if h := hexOf(got[i]); h != want[i] {
			t.Errorf("%s proof hash %d = %s, want %s", kind, i, h, want[i])
		}
	}
}
