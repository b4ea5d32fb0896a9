package head

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// tree builds a tenant tree of n leaves with the module's reference tree
// (testonly.Tree) and returns the leaves and the unsigned head of each size.
func tree(t *testing.T, n int) ([][]byte, *testonly.Tree) {
	t.Helper()
	ref := testonly.New(rfc6962.DefaultHasher)
	var leaves [][]byte
	for i := range n {
		l := leaf.Leaf{
			Schema: leaf.Schema, RequestID: fmt.Sprintf("req_%d", i), Sequence: uint64(2*i + 1),
			TenantID: "acme", ApplianceID: "app_one", KeyID: "key_a",
			Time: leaf.FormatTime(day0), Endpoint: "/v1/models", Status: 200,
			RequestSHA256: leaf.BodyHash(nil), ResponseSHA256: leaf.BodyHash(nil),
			Salt: "000102030405060708090a0b0c0d0e0f",
		}
		b, err := leaf.Canonical(l)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, b)
		ref.AppendData(b)
	}
	return leaves, ref
}

func headAt(ref *testonly.Tree, size uint64) Head {
	last := uint64(0)
	if size > 0 {
		last = 2*size - 1
	}
	return Head{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01", EventCount: size,
		LastSequence: last, MerkleRoot: hex.EncodeToString(ref.HashAt(size)),
		SignedAt: FormatSignedAt(day0.Add(time.Hour))}
}

func TestVerifyInclusion(t *testing.T) {
	leaves, ref := tree(t, 7)
	h := headAt(ref, 7)
	for i := range uint64(7) {
		p, err := ref.InclusionProof(i, 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyInclusion(h, leaves[i], i, p); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		if err := VerifyInclusion(h, leaves[(i+1)%7], i, p); err == nil {
			t.Fatalf("leaf %d: accepted another leaf", i)
		}
	}
	other := h
	other.TenantID = "globex"
	p, _ := ref.InclusionProof(0, 7)
	if err := VerifyInclusion(other, leaves[0], 0, p); err == nil {
		t.Fatal("accepted a leaf of another tenant")
	}
	short := headAt(ref, 7)
	short.LastSequence = 1
	short.EventCount = 1
	if err := VerifyInclusion(short, leaves[3], 3, p); err == nil {
		t.Fatal("accepted a leaf after the head's last sequence")
	}
}

func TestVerifyConsistency(t *testing.T) {
	_, ref := tree(t, 9)
	for _, sizes := range [][2]uint64{{0, 5}, {1, 1}, {1, 9}, {3, 7}, {4, 8}, {6, 9}} {
		p, err := ref.ConsistencyProof(sizes[0], sizes[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyConsistency(headAt(ref, sizes[0]), headAt(ref, sizes[1]), p); err != nil {
			t.Fatalf("%v: %v", sizes, err)
		}
	}
	p, _ := ref.ConsistencyProof(3, 7)
	if err := VerifyConsistency(headAt(ref, 7), headAt(ref, 3), p); err == nil {
		t.Fatal("accepted a shrinking tree")
	}
	forked := headAt(ref, 7)
	forked.MerkleRoot = hex.EncodeToString(rfc6962.DefaultHasher.HashLeaf([]byte("fork")))
	if err := VerifyConsistency(headAt(ref, 3), forked, p); err == nil {
		t.Fatal("accepted a forked tree")
	}
	otherDay := headAt(ref, 7)
	otherDay.Day = "2026-03-02"
	if err := VerifyConsistency(headAt(ref, 3), otherDay, p); err == nil {
		t.Fatal("accepted heads of different days")
	}
}
