package log

import (
	"bytes"
	"testing"
)

func TestKeyLayouts(t *testing.T) {
	const day, tenant = "2026-03-01", "acme"
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"event", eventKey(day, 0x0102), day + "\x00\x00\x00\x00\x00\x00\x01\x02"},
		{"tree", treeKey(day, tenant), day + tenant},
		{"tenant prefix", tenantPrefix(day, tenant), day + tenant + "\x00"},
		{"node", nodeKey(day, tenant, 3, 0x0405), day + tenant + "\x00\x03\x00\x00\x00\x00\x00\x00\x04\x05"},
		{"leaf", leafKey(day, tenant, 7), day + tenant + "\x00\x00\x00\x00\x00\x00\x00\x00\x07"},
		{"head", headKey(day, tenant, 1<<56), day + tenant + "\x00\x01\x00\x00\x00\x00\x00\x00\x00"},
		{"leaf value", leafValue(9, []byte("req_1")), "\x00\x00\x00\x00\x00\x00\x00\x09req_1"},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, []byte(tt.want)) {
			t.Errorf("%s key = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
