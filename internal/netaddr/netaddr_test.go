package netaddr

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/central/tlsconf"
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
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %t, want %t", addr, got, want)
		}
	}
}

// The listener offers HTTP/1.1 only, at TLS 1.2 or later, whatever the
// configuration it is given, which it leaves as it was.
func TestHTTP1Listener(t *testing.T) {
	cert, certPEM, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	in := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS10}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := HTTP1Listener(raw, in)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", p)
	}
	_ = c.Close()
	if c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}); err == nil {
		_ = c.Close()
		t.Error("a TLS 1.1 client was served")
	}
	if !slices.Equal(in.NextProtos, []string{"h2", "http/1.1"}) || in.MinVersion != tls.VersionTLS10 {
		t.Error("the given configuration was changed")
	}
}
