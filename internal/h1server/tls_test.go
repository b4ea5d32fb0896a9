package h1server

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/internal/testpki"
)

// TestTLS: over netaddr.HTTP1Listener the request is served with r.TLS
// set; plain HTTP to it is told so.
func TestTLS(t *testing.T) {
	ca := testpki.NewCA(t, "test")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = netaddr.HTTP1Listener(l, &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}})
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			http.Error(w, "no TLS state", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, r.TLS.ServerName)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	t.Cleanup(client.CloseIdleConnections)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	resp, err := client.Get("https://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "localhost" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}

	c := dial(t, l.Addr().String())
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP: %d", r.StatusCode)
	}
}
