package appliance

import (
	"crypto/tls"
	"slices"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true,
		"127.9.9.9:8080": true,
		"[::1]:8080":     true,
		"localhost:8080": true,
		"0.0.0.0:8080":   false,
		":8080":          false,
		"[::]:8080":      false,
		"10.0.0.5:8080":  false,
		"gw.example:443": false,
		"127.0.0.1":      false, // no port: not a listen address
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %t, want %t", addr, got, want)
		}
	}
}

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
