package receipt

import (
	"encoding/base64"
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
	e.once.Do(func() { e.tail = base64.RawURLEncoding.EncodeToString(r.appendTail(nil)) })
	scratch := heads.Get().(*[]byte)
	defer heads.Put(scratch)
	head := r.appendHead((*scratch)[:0])
	for len(head)%3 != 0 {
		head = append(head, ' ')
	}
	*scratch = head
	var b strings.Builder
	b.Grow(base64.RawURLEncoding.EncodedLen(len(head)) + len(e.tail))
	enc := base64.NewEncoder(base64.RawURLEncoding, &b)
	_, _ = enc.Write(head) // a whole number of groups: nothing held back
	b.WriteString(e.tail)
	return b.String()
}

// heads are the scratch buffers of HeaderEncoder.Value.
var heads = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendHead appends the document up to batch_path, the receipt's own
// members.
func (r *Receipt) appendHead(b []byte) []byte {
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
	b = openai.AppendString(b, r.BatchRoot)
	b = append(b, `,"batch_path":`...)
	if r.BatchPath == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, h := range r.BatchPath {
			if i > 0 {
				b = append(b, ',')
			}
			b = openai.AppendString(b, h)
		}
		b = append(b, ']')
	}
	return b
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
