package forward

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/centralclient"
)

// TestChunkFormats: a chunk queued before leaves carried their canonical
// bytes (format 0: sequence, hash, request id) reads as leaves without
// them; a chunk of the current format keeps each leaf's bytes, and queues
// one beyond centralclient.MaxLeafBytes with its hash alone.
func TestChunkFormats(t *testing.T) {
	hash := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	refs := []auditlog.LeafRef{
		{RequestID: "req_one", Sequence: 3, LeafHash: hash(1), Leaf: []byte(`{"request_id":"req_one"}`)},
		{RequestID: "req_two", Sequence: 5, LeafHash: hash(2), Leaf: []byte(`{"model":"` + strings.Repeat("m", centralclient.MaxLeafBytes) + `"}`)},
		{RequestID: "req_three", Sequence: 9, LeafHash: hash(3)},
	}
	got, err := decodeLeaves(encodeLeaves(refs), 7, chunkWithLeaves)
	if err != nil {
		t.Fatal(err)
	}
	want := []centralclient.Leaf{
		{RequestID: "req_one", Sequence: 3, LeafIndex: 7, LeafHash: hash(1), Leaf: refs[0].Leaf},
		{RequestID: "req_two", Sequence: 5, LeafIndex: 8, LeafHash: hash(2)},
		{RequestID: "req_three", Sequence: 9, LeafIndex: 9, LeafHash: hash(3)},
	}
	check := func(what string, got, want []centralclient.Leaf) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d leaves, want %d", what, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.RequestID != w.RequestID || g.Sequence != w.Sequence || g.LeafIndex != w.LeafIndex ||
				!bytes.Equal(g.LeafHash, w.LeafHash) || !bytes.Equal(g.Leaf, w.Leaf) || (g.Leaf == nil) != (w.Leaf == nil) {
				t.Fatalf("%s: leaf %d is %+v, want %+v", what, i, g, w)
			}
		}
	}
	check("current format", got, want)

	var old []byte // format 0, as an earlier version queued it
	for _, r := range refs {
		old = binary.BigEndian.AppendUint64(old, r.Sequence)
		old = append(old, r.LeafHash...)
		old = append(old, byte(len(r.RequestID)))
		old = append(old, r.RequestID...)
	}
	if got, err = decodeLeaves(old, 7, 0); err != nil {
		t.Fatal(err)
	}
	want[0].Leaf = nil
	check("format 0", got, want)

	cut := encodeLeaves(refs[:1])
	if _, err := decodeLeaves(cut[:len(cut)-1], 0, chunkWithLeaves); err == nil {
		t.Fatal("a chunk cut inside a leaf decoded")
	}
}
