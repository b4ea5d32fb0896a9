package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// testBatch signs a batch of n claims with a fresh appliance certificate.
func testBatch(t testing.TB, n int) (*Batch, []Claim, *fleet.Appliance) {
	t.Helper()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ca, err := fleet.NewCA("test fleet CA", at.AddDate(0, -1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ca.Now = func() time.Time { return at.AddDate(0, -1, 0) }
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_hdr")
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]Claim, n)
	leaves := make([][]byte, n)
	for i := range claims {
		h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		claims[i] = Claim{RequestID: fmt.Sprintf("req_h%0*d", 1+i%7, i), TenantID: [...]string{"acme", "globex", "initech"}[i%3],
			ApplianceID: "app_hdr", Day: "2026-03-01", Sequence: uint64(1000 + i), LeafIndex: uint64(i / 3),
			Time: "2026-03-01T11:59:59.250000Z", LeafHash: h[:]}
		leaves[i] = claims[i].Hash()
	}
	tree := NewTree(leaves)
	signed, err := Sign(Statement{Day: "2026-03-01", FirstSequence: 1000, Size: tree.Size(), Root: tree.Root()}, app, at)
	if err != nil {
		t.Fatal(err)
	}
	return NewBatch(tree, signed), claims, app
}

// TestHeaderOfIsHeader: the header value written from the claim and the
// tree is byte for byte the one of the receipt document (Header), which
// decodes to that document with at most two spaces of padding, for every
// claim of batches of several sizes (paths of 0 to 7 hashes, request ids
// of several lengths).
func TestHeaderOfIsHeader(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 31, 64, 100} {
		b, claims, _ := testBatch(t, n)
		var ref HeaderEncoder
		for i, c := range claims {
			r := b.Receipt(c, uint64(i))
			got, want := b.HeaderOf(c, uint64(i)), ref.Value(&r)
			if got != want {
				t.Fatalf("batch of %d, claim %d: HeaderOf\n%s\nHeader\n%s", n, i, got, want)
			}
			doc, err := base64.RawURLEncoding.DecodeString(got)
			if err != nil {
				t.Fatal(err)
			}
			compact := bytes.Replace(doc, []byte(`]  ,"signed_at"`), []byte(`],"signed_at"`), 1)
			compact = bytes.Replace(compact, []byte(`] ,"signed_at"`), []byte(`],"signed_at"`), 1)
			if !bytes.Equal(compact, r.AppendJSON(nil)) {
				t.Fatalf("batch of %d, claim %d: header value of\n%s\nnot\n%s", n, i, doc, r.AppendJSON(nil))
			}
		}
	}
}

// TestClaimBytesAreJCS: a claim's bytes are the RFC 8785 canonical form of
// its members (encoding/json, then gowebpki/jcs).
func TestClaimBytesAreJCS(t *testing.T) {
	_, claims, _ := testBatch(t, 3)
	for _, c := range claims {
		raw, err := json.Marshal(map[string]any{"appliance_id": c.ApplianceID, "day": c.Day,
			"leaf_hash": hex.EncodeToString(c.LeafHash), "leaf_index": c.LeafIndex, "request_id": c.RequestID,
			"schema": Schema, "sequence": c.Sequence, "tenant_id": c.TenantID, "time": c.Time})
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("claim bytes\n%s\nJCS\n%s", got, want)
		}
		if got, want := c.Hash(), sha256.Sum256(append([]byte{0}, want...)); !bytes.Equal(got, want[:]) {
			t.Fatalf("claim hash %x, want %x", got, want)
		}
	}
}

// TestReceiptAllocations guards the cost of the receipts on every
// recorded request, as allocation counts (deterministic, unlike time): a
// header value is one allocation (the string itself; the batch's members
// are encoded by the first value only), a claim's hash none beyond the
// bytes it appends to, a batch's tree four whatever its size (the fifth
// below is the test's own slice of leaves), a statement's signed bytes
// one and the check of its signed_at none.
func TestReceiptAllocations(t *testing.T) {
	b, claims, _ := testBatch(t, 64)
	_ = b.HeaderOf(claims[0], 0) // the batch's members, once
	for _, c := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"header value", 1, func() { _ = b.HeaderOf(claims[37], 37) }},
		{"claim hash", 0, func() { _ = claims[5].AppendHash(make([]byte, 0, 32)) }},
		{"statement body", 1, func() {
			_ = Statement{ApplianceID: "app_hdr", Day: "2026-03-01", FirstSequence: 1000, Size: 64,
				Root: claims[0].LeafHash, SignedAt: "2026-03-01T12:00:00Z"}.Body()
		}},
		{"signed_at parsed", 0, func() { _, _ = ParseSignedAt("2026-03-01T12:00:00Z") }},
		{"tree of 64 claims", 5, func() {
			leaves := make([][]byte, 64)
			for i := range leaves {
				leaves[i] = claims[i].LeafHash
			}
			_ = NewTree(leaves)
		}},
	} {
		if got := testing.AllocsPerRun(200, c.f); got > c.max {
			t.Errorf("%s: %v allocations, at most %v", c.name, got, c.max)
		}
	}
}

func BenchmarkHeaderOf(b *testing.B) {
	batch, claims, _ := testBatch(b, 32)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = batch.HeaderOf(claims[i%32], uint64(i%32))
		i++
	}
}

func BenchmarkHeaderOfReceipt(b *testing.B) {
	batch, claims, _ := testBatch(b, 32)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := batch.Receipt(claims[i%32], uint64(i%32))
		_ = batch.Header(&r)
		i++
	}
}
