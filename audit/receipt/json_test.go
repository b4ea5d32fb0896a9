package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// TestAppendJSONIsEncodingJSON: the direct encoding is byte for byte
// encoding/json's, for receipts as the log makes them and for strings
// that need every kind of escape.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	for _, r := range []Receipt{
		{},
		{Schema: Schema, RequestID: "req_1", TenantID: "acme", ApplianceID: "app_x", Day: "2026-03-01",
			Sequence: 7, LeafIndex: 2, Time: "2026-03-01T12:00:00.250000Z", LeafHash: "ab", BatchIndex: 1,
			BatchSize: 3, BatchRoot: "cd", BatchPath: []string{"01", "02"}, SignedAt: "2026-03-01T12:00:01Z",
			Signature: "MEUC+/==", Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
		{Schema: "\"\\<>&\x00\x1f\t\r\n\b\f", RequestID: "é\u2028\u2029\xff\xfe", BatchPath: []string{}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("AppendJSON\n%s\nencoding/json\n%s", got, want)
		}
	}
}

// TestHeaderValue: a header value is the base64url of the document, with
// at most two spaces between batch_path and signed_at, for receipts of
// one batch whose own members vary in length.
func TestHeaderValue(t *testing.T) {
	var enc HeaderEncoder
	base := Receipt{Schema: Schema, RequestID: "req_1", TenantID: "acme", ApplianceID: "app_x", Day: "2026-03-01",
		Time: "2026-03-01T12:00:00.250000Z", BatchRoot: "cd", SignedAt: "2026-03-01T12:00:01Z",
		Signature: "MEUC+/==", Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
	for i := range 7 {
		r := base
		r.RequestID += string(bytes.Repeat([]byte("7"), i))
		r.Sequence, r.BatchIndex = uint64(1+i*10), uint64(i)
		r.BatchPath = []string{"01"}
		doc, err := base64.RawURLEncoding.DecodeString(enc.Value(&r))
		if err != nil {
			t.Fatal(err)
		}
		want := r.AppendJSON(nil)
		if got := bytes.Replace(bytes.Replace(doc, []byte("] "), []byte("]"), 1), []byte("] "), []byte("]"), 1); !bytes.Equal(got, want) {
			t.Fatalf("header value of\n%s\nis of\n%s", want, doc)
		}
		var back Receipt
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
	}
}
