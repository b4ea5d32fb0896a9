package receipt

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// AppendJSON appends r's JSON document to b: its members in the order of
// the struct, as encoding/json writes them (json.Marshal(r) gives the same
// bytes; a test holds them equal). Written directly because every reply
// of the gateway carries one, and reflection costs several times more.
func (r *Receipt) AppendJSON(b []byte) []byte { return r.appendTail(r.appendHead(b)) }

// HeaderEncoder writes the x-tollgate-receipt values of one batch's
// receipts: unpadded base64url of the JSON document. The members from
// signed_at on (signature and certificate: two thirds of the bytes) are
// the batch's, so they are encoded once; each receipt's own members before
// them are padded with spaces between two members (insignificant white
// space) to a multiple of 3 bytes, so that the two encodings join into
// that of the whole document. Use one encoder per batch.
type HeaderEncoder struct {
	once sync.Once
	tail string
}

// Value is r's header value.
func (e *HeaderEncoder) Value(r *Receipt) string {
	tail := e.tailOf(r)
	var scratch [scratchSize]byte
	return joinHeader(r.appendHead(scratch[:0]), tail)
}

// tailOf returns the base64url of the batch's members, r's the first
// time.
func (e *HeaderEncoder) tailOf(r *Receipt) string {
	e.once.Do(func() {
		var scratch [scratchSize]byte
		e.tail = base64.RawURLEncoding.EncodeToString(r.appendTail(scratch[:0]))
	})
	return e.tail
}

// scratchSize fits a document's head (~1,500 bytes with a path of 16
// hashes) and its base64 on the stack, and its tail (~1,000 bytes with an
// ECDSA P-256 certificate, less with an Ed25519 one).
const scratchSize = 4096

// joinHeader pads the document's head with spaces to whole base64 groups,
// encodes it after itself in head's array, and returns that encoding
// followed by tail: the header value, in one allocation of its exact
// length (the string).
func joinHeader(head []byte, tail string) string {
	for len(head)%3 != 0 {
		head = append(head, ' ')
	}
	n := len(head)
	head = slices.Grow(head, base64.RawURLEncoding.EncodedLen(n))
	head = head[:n+base64.RawURLEncoding.EncodedLen(n)]
	base64.RawURLEncoding.Encode(head[n:], head[:n]) // whole groups: no padding
	var b strings.Builder
	b.Grow(len(head) - n + len(tail))
	b.Write(head[n:])
	b.WriteString(tail)
	return b.String()
}

// appendHead appends the document up to batch_path, the receipt's own
// members.
func (r *Receipt) appendHead(b []byte) []byte {
	b = r.appendClaimMembers(b)
	b = append(b, `,"batch_path":`...)
	if r.BatchPath == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, h := range r.BatchPath {
		if i > 0 {
			b = append(b, ',')
		}
		b = openai.AppendString(b, h)
	}
	return append(b, ']')
}

// appendClaimMembers appends the document up to batch_root, the members
// before batch_path.
func (r *Receipt) appendClaimMembers(b []byte) []byte {
	b = append(b, `{"schema":`...)
	b = openai.AppendString(b, r.Schema)
	b = append(b, `,"request_id":`...)
	b = openai.AppendString(b, r.RequestID)
	b = append(b, `,"tenant_id":`...)
	b = openai.AppendString(b, r.TenantID)
	b = append(b, `,"appliance_id":`...)
	b = openai.AppendString(b, r.ApplianceID)
	b = append(b, `,"day":`...)
	b = openai.AppendString(b, r.Day)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, r.Sequence, 10)
	b = append(b, `,"leaf_index":`...)
	b = strconv.AppendUint(b, r.LeafIndex, 10)
	b = append(b, `,"time":`...)
	b = openai.AppendString(b, r.Time)
	b = append(b, `,"leaf_hash":`...)
	b = openai.AppendString(b, r.LeafHash)
	b = append(b, `,"batch_index":`...)
	b = strconv.AppendUint(b, r.BatchIndex, 10)
	b = append(b, `,"batch_size":`...)
	b = strconv.AppendUint(b, r.BatchSize, 10)
	b = append(b, `,"batch_root":`...)
	return openai.AppendString(b, r.BatchRoot)
}

// appendTail appends the document from signed_at on, its batch's members.
func (r *Receipt) appendTail(b []byte) []byte {
	b = append(b, `,"signed_at":`...)
	b = openai.AppendString(b, r.SignedAt)
	b = append(b, `,"signature":`...)
	b = openai.AppendString(b, r.Signature)
	b = append(b, `,"certificate":`...)
	b = openai.AppendString(b, r.Certificate)
	return append(b, '}')
}

// appendHeadOf appends the head of the document of claim c at index i of
// the batch (the bytes b.Receipt(c, i).appendHead appends), written from
// the claim and the tree without the Receipt's strings: hex needs no JSON
// escape, so hashes are encoded into b directly.
func (b *Batch) appendHeadOf(dst []byte, c Claim, i uint64) []byte {
	dst = append(dst, `{"schema":`...)
	dst = openai.AppendString(dst, b.shared.Schema)
	dst = append(dst, `,"request_id":`...)
	dst = openai.AppendString(dst, c.RequestID)
	dst = append(dst, `,"tenant_id":`...)
	dst = openai.AppendString(dst, c.TenantID)
	dst = append(dst, `,"appliance_id":`...)
	dst = openai.AppendString(dst, c.ApplianceID)
	dst = append(dst, `,"day":`...)
	dst = openai.AppendString(dst, c.Day)
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendUint(dst, c.Sequence, 10)
	dst = append(dst, `,"leaf_index":`...)
	dst = strconv.AppendUint(dst, c.LeafIndex, 10)
	dst = append(dst, `,"time":`...)
	dst = openai.AppendString(dst, c.Time)
	dst = append(dst, `,"leaf_hash":"`...)
	dst = hex.AppendEncode(dst, c.LeafHash)
	dst = append(dst, `","batch_index":`...)
	dst = strconv.AppendUint(dst, i, 10)
	dst = append(dst, `,"batch_size":`...)
	dst = strconv.AppendUint(dst, b.shared.BatchSize, 10)
	dst = append(dst, `,"batch_root":`...)
	dst = openai.AppendString(dst, b.shared.BatchRoot)
	dst = append(dst, `,"batch_path":[`...)
	idx := i
	first := true
	for _, level := range b.tree.levels[:len(b.tree.levels)-1] {
		if s := idx ^ 1; s < uint64(len(level)) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = hex.AppendEncode(dst, level[s])
			dst = append(dst, '"')
		}
		idx >>= 1
	}
	return append(dst, ']')
}
