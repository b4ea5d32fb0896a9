package rest

import (
	"bytes"
	"encoding/json"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
)

// marshaler writes protojson with the proto field names (snake_case) and
// every field present, compacted: protojson adds random spaces to its
// output on purpose; a compact document has no insignificant byte, so any
// byte changed in a served head or proof changes what it says. Integers
// are numbers because the counts are 32-bit fields (protojson writes 64-bit
// integers as strings).
type marshaler struct{ runtime.JSONPb }

func newMarshaler() *marshaler {
	return &marshaler{runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// Marshal returns the compact JSON of v.
func (m *marshaler) Marshal(v any) ([]byte, error) {
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
