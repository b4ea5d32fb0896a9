package receipt

import (
	"bytes"
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
