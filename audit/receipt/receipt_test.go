package receipt

import (
	"bytes"
	"math"
	"testing"
)

// TestStatementBody holds the signed bytes to their documented form
// (docs/audit-format.md, "The batch statement").
func TestStatementBody(t *testing.T) {
	root := bytes.Repeat([]byte{0xfb}, 32)
	tests := []struct {
		name string
		s    Statement
		want string
	}{
		{"batch", Statement{ApplianceID: "app_example", Day: "2026-03-01", FirstSequence: 1000, Size: 64,
			Root: root, SignedAt: "2026-03-01T12:00:00Z"},
			"tollgate-audit-receipts/v1/app_example/2026-03-01\n64\n" +
				"+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s=\n" +
				"first_sequence 1000\nsigned_at 2026-03-01T12:00:00Z\n"},
		{"largest numbers", Statement{ApplianceID: "app_x", Day: "2026-12-31", FirstSequence: math.MaxUint64,
			Size: math.MaxUint64, Root: root[:1], SignedAt: "2026-12-31T23:59:59Z"},
			"tollgate-audit-receipts/v1/app_x/2026-12-31\n18446744073709551615\n+w==\n" +
				"first_sequence 18446744073709551615\nsigned_at 2026-12-31T23:59:59Z\n"},
		{"empty", Statement{}, "tollgate-audit-receipts/v1//\n0\n\nfirst_sequence 0\nsigned_at \n"},
	}
	for _, tt := range tests {
		if got := string(tt.s.Body()); got != tt.want {
			t.Errorf("%s: body\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
}

func TestParseSignedAt(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"2026-03-01T12:00:00Z", true},
		{"2026-03-01T12:00:00.5Z", false},
		{"2026-03-01T12:00:00+00:00", false},
		{"2026-03-01T13:00:00+01:00", false},
		{"2026-3-01T12:00:00Z", false},
		{"", false},
	} {
		if _, err := ParseSignedAt(c.s); (err == nil) != c.ok {
			t.Errorf("ParseSignedAt(%q) = %v, want ok %v", c.s, err, c.ok)
		}
	}
}
