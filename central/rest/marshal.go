package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"

	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// marshaler writes protojson with the proto field names (snake_case) and
// every field present, compacted: protojson adds random spaces to its
// output on purpose; a compact document has no insignificant byte, so any
// byte changed in a served head or proof changes what it says. Integers
// are numbers because the counts are 32-bit fields (protojson writes 64-bit
// integers as strings).
//
// The two responses the API serves, heads and proofs, are written by hand
// (appendProof, appendHeads) to exactly the bytes protojson then
// json.Compact would give, which TestMarshalMatchesProtojson checks: the
// generic path costs about a tenth of a proof request.
type marshaler struct{ runtime.JSONPb }

func newMarshaler() *marshaler {
	return &marshaler{runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// Marshal returns the compact JSON of v.
func (m *marshaler) Marshal(v any) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch msg := v.(type) {
	case *centralv1.GetProofResponse:
		out, err = appendProof(make([]byte, 0, 5120), msg)
	case *centralv1.ListHeadsResponse:
		out, err = appendHeads(make([]byte, 0, 1024+1024*len(msg.GetData())), msg)
	default:
		return m.generic(v)
	}
	if err != nil {
		return m.generic(v) // protojson reports the error
	}
	return out, nil
}

// generic is protojson, compacted.
func (m *marshaler) generic(v any) ([]byte, error) {
	raw, err := m.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func appendProof(b []byte, p *centralv1.GetProofResponse) ([]byte, error) {
	var err error
	b = append(b, `{"appliance_id":`...)
	if b, err = appendString(b, p.GetApplianceId()); err != nil {
		return nil, err
	}
	b = append(b, `,"day":`...)
	if b, err = appendString(b, p.GetDay()); err != nil {
		return nil, err
	}
	b = append(b, `,"request_id":`...)
	if b, err = appendString(b, p.GetRequestId()); err != nil {
		return nil, err
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, uint64(p.GetSequence()), 10)
	b = append(b, `,"leaf_index":`...)
	b = strconv.AppendUint(b, uint64(p.GetLeafIndex()), 10)
	b = append(b, `,"tree_size":`...)
	b = strconv.AppendUint(b, uint64(p.GetTreeSize()), 10)
	b = append(b, `,"leaf_hash":`...)
	if b, err = appendString(b, p.GetLeafHash()); err != nil {
		return nil, err
	}
	b = append(b, `,"audit_path":[`...)
	for i, h := range p.GetAuditPath() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendString(b, h); err != nil {
			return nil, err
		}
	}
	b = append(b, `],"head":`...)
	if p.GetHead() == nil {
		b = append(b, "null"...)
	} else if b, err = appendHead(b, p.GetHead()); err != nil {
		return nil, err
	}
	// The canonical leaf as a JSON string: its exact bytes survive any
	// re-serialisation of the document, and a verifier hashes them.
	b = append(b, `,"leaf":`...)
	if b, err = appendString(b, p.GetLeaf()); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendHeads(b []byte, l *centralv1.ListHeadsResponse) ([]byte, error) {
	var err error
	b = append(b, `{"data":[`...)
	for i, h := range l.GetData() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendHead(b, h); err != nil {
			return nil, err
		}
	}
	b = append(b, ']')
	if l.NextPageToken != nil {
		// Optional: present only when set, as protojson writes it.
		b = append(b, `,"next_page_token":`...)
		if b, err = appendString(b, l.GetNextPageToken()); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendHead(b []byte, h *centralv1.Head) ([]byte, error) {
	var err error
	for _, f := range [...]struct {
		name  string
		value string
	}{
		{`{"tenant_id":`, h.GetTenantId()},
		{`,"appliance_id":`, h.GetApplianceId()},
		{`,"day":`, h.GetDay()},
	} {
		b = append(b, f.name...)
		if b, err = appendString(b, f.value); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"event_count":`...)
	b = strconv.AppendUint(b, uint64(h.GetEventCount()), 10)
	b = append(b, `,"last_sequence":`...)
	b = strconv.AppendUint(b, uint64(h.GetLastSequence()), 10)
	for _, f := range [...]struct {
		name  string
		value string
	}{
		{`,"merkle_root":`, h.GetMerkleRoot()},
		{`,"signature":`, h.GetSignature()},
		{`,"signed_at":`, h.GetSignedAt()},
		{`,"certificate":`, h.GetCertificate()},
	} {
		b = append(b, f.name...)
		if b, err = appendString(b, f.value); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

var errInvalidUTF8 = errors.New("rest: invalid UTF-8 in a string")

// appendString quotes s as protojson does: only '"', '\\' and control
// characters are escaped (the short escapes where JSON has them, else
// \u00XX); other characters, HTML ones included, are written as they are.
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] >= ' ' && s[i] != '"' && s[i] != '\\' && s[i] < utf8.RuneSelf {
			i++
		}
		b, s = append(b, s[:i]...), s[i:]
		if len(s) == 0 {
			break
		}
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			return nil, errInvalidUTF8
		case r >= utf8.RuneSelf:
			b = append(b, s[:n]...)
		default:
			b = append(b, '\\')
			switch r {
			case '"', '\\':
				b = append(b, byte(r))
			case '\b':
				b = append(b, 'b')
			case '\f':
				b = append(b, 'f')
			case '\n':
				b = append(b, 'n')
			case '\r':
				b = append(b, 'r')
			case '\t':
				b = append(b, 't')
			default:
				b = append(b, 'u')
				b = append(b, "0000"[1+(bits.Len32(uint32(r))-1)/4:]...)
				b = strconv.AppendUint(b, uint64(r), 16)
			}
		}
		s = s[n:]
	}
	return append(b, '"'), nil
}
