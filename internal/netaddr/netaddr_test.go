package netaddr

import "testing"

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
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %t, want %t", addr, got, want)
		}
	}
}
