package appliance

import (
	"crypto/tls"
	"slices"
	"testing"
)

// The gateway offers HTTP/1.1 only, at TLS 1.2 or later, whatever the
// configuration it is given, which it leaves as it was.
func TestGatewayTLSConfig(t *testing.T) {
	in := &tls.Config{NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS10}
	got := gatewayTLS(in)
	if !slices.Equal(got.NextProtos, []string{"http/1.1"}) || got.MinVersion != tls.VersionTLS12 {
		t.Errorf("NextProtos %q, MinVersion %x; want [http/1.1], TLS 1.2", got.NextProtos, got.MinVersion)
	}
	if !slices.Equal(in.NextProtos, []string{"h2", "http/1.1"}) || in.MinVersion != tls.VersionTLS10 {
		t.Error("the given configuration was changed")
	}
	if got := gatewayTLS(&tls.Config{MinVersion: tls.VersionTLS13}); got.MinVersion != tls.VersionTLS13 {
		t.Errorf("MinVersion %x, want TLS 1.3 kept", got.MinVersion)
	}
}
