package centralclient

import (
	"bytes"
	"testing"
)

// TestChunkLen: a message carries at most ChunkSize leaves, and leaves
// whose canonical bytes stay within ChunkBytes, but always one leaf.
func TestChunkLen(t *testing.T) {
	leaves := func(n, size int) []Leaf {
		out := make([]Leaf, n)
		for i := range out {
			out[i].Leaf = bytes.Repeat([]byte{'x'}, size)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		leaves []Leaf
		want   int
	}{
		{"hashes alone", leaves(ChunkSize+5, 0), ChunkSize},
		{"fewer than a chunk", leaves(10, 700), 10},
		{"a chunk of usual leaves", leaves(ChunkSize+1, 700), ChunkSize},
		{"large leaves", leaves(1000, MaxLeafBytes), ChunkBytes / MaxLeafBytes},
		{"a leaf beyond ChunkBytes alone", leaves(3, ChunkBytes+1), 1},
		{"exactly ChunkBytes", leaves(4, ChunkBytes/2), 2},
	} {
		if got := chunkLen(c.leaves); got != c.want {
			t.Errorf("%s: %d leaves, want %d", c.name, got, c.want)
		}
	}
}
