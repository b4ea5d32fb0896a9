package rest

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// randomString mixes the characters the hand-written writer must treat as
// protojson does: plain ASCII, HTML, quotes, backslashes, every control
// character, multi-byte UTF-8 and U+FFFD.
func randomString(rng *rand.Rand) string {
	pieces := []string{"a", "Z", "0", "req_", "+/=", "<", ">", "&", `"`, `\`, "\n", "\t", "\r", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
		"é", "€", "\u2028", "\U0001F600", "\uFFFD", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
	var s strings.Builder
	for range rng.IntN(12) {
		s.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return s.String()
}

func randomHead(rng *rand.Rand) *centralv1.Head {
	return &centralv1.Head{
		TenantId: randomString(rng), ApplianceId: randomString(rng), Day: randomString(rng),
		EventCount: rng.Uint32() >> rng.IntN(32), LastSequence: rng.Uint32() >> rng.IntN(32),
		MerkleRoot: randomString(rng), Signature: randomString(rng), SignedAt: randomString(rng), Certificate: randomString(rng),
	}
}

// TestMarshalMatchesProtojson: the hand-written heads and proof documents
// are byte for byte what protojson (proto names, unpopulated fields
// emitted) compacted gives, on random values, empty ones included.
func TestMarshalMatchesProtojson(t *testing.T) {
	m := newMarshaler()
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := []any{
		&centralv1.GetProofResponse{}, &centralv1.ListHeadsResponse{},
		&centralv1.ListHeadsResponse{Data: []*centralv1.Head{{}}},
		&centralv1.ListHeadsResponse{NextPageToken: proto.String("")},
	}
	for range 2000 {
		p := &centralv1.GetProofResponse{
			ApplianceId: randomString(rng), Day: randomString(rng), RequestId: randomString(rng),
			Sequence: rng.Uint32(), LeafIndex: rng.Uint32() >> rng.IntN(32), TreeSize: rng.Uint32(), LeafHash: randomString(rng),
			Leaf: randomString(rng),
		}
		for range rng.IntN(4) {
			p.AuditPath = append(p.AuditPath, randomString(rng))
		}
		if rng.IntN(4) > 0 {
			p.Head = randomHead(rng)
		}
		l := &centralv1.ListHeadsResponse{}
		for range rng.IntN(4) {
			l.Data = append(l.Data, randomHead(rng))
		}
		if rng.IntN(2) == 0 {
			l.NextPageToken = proto.String(randomString(rng))
		}
		msgs = append(msgs, p, l)
	}
	for _, msg := range msgs {
		got, err := m.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.generic(msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("hand-written\n%s\nprotojson\n%s", got, want)
		}
	}
	// Invalid UTF-8 goes to protojson, which refuses it.
	if _, err := m.Marshal(&centralv1.GetProofResponse{RequestId: "req_\xff"}); err == nil {
		t.Fatal("invalid UTF-8 marshalled")
	}
}

func BenchmarkMarshalProof(b *testing.B) {
	m := newMarshaler()
	p := &centralv1.GetProofResponse{ApplianceId: "app_bench", Day: "2026-11-23", RequestId: "req_0123456789abcdef",
		Sequence: 12345, LeafIndex: 6000, TreeSize: 100000, LeafHash: strings.Repeat("ab", 32),
		AuditPath: make([]string, 17), Head: &centralv1.Head{TenantId: "acme", ApplianceId: "app_bench", Day: "2026-11-23",
			EventCount: 100000, LastSequence: 200000, MerkleRoot: strings.Repeat("cd", 32), Signature: strings.Repeat("QUJD", 24),
			SignedAt: "2026-11-23T12:00:00Z", Certificate: "-----BEGIN CERTIFICATE-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 10) + "-----END CERTIFICATE-----\n"},
		Leaf: `{"appliance_id":"app_bench","completion_tokens":5,"endpoint":"/v1/chat/completions","key_id":"key_bench","model":"builtin/echo","prompt_tokens":12,"request_id":"req_0123456789abcdef","request_sha256":"` +
			strings.Repeat("01", 32) + `","response_sha256":"` + strings.Repeat("23", 32) + `","salt":"000102030405060708090a0b0c0d0e0f","schema":"tollgate-audit-leaf/v1","sequence":12345,"status":200,"tenant_id":"acme","time":"2026-11-23T12:00:00.250000Z"}`}
	for i := range p.AuditPath {
		p.AuditPath[i] = strings.Repeat("ef", 32)
	}
	b.Run("hand-written", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.generic(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
