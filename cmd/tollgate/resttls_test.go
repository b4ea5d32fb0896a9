package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
)

// TestCentralRESTTLS: with a certificate the central plane serves its
// REST audit API over HTTPS (HTTP/1.1) and not over plain HTTP; the
// certificate and its key go together.
func TestCentralRESTTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	c := startCommand(t, newOutputs(), "central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", t.TempDir(),
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0",
		"--rest-tls-cert", certFile, "--rest-tls-key", keyFile)
	rest := c.match(t, `OpenAPI: (https://\S+)/v1/openapi.json`)

	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(transport.CloseIdleConnections)
	resp, err := (&http.Client{Transport: transport}).Get(rest + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 || resp.TLS == nil {
		t.Fatalf("openapi.json over TLS: %d %s %+v", resp.StatusCode, resp.Proto, resp.TLS)
	}
	if plain, err := http.Get("http://" + strings.TrimPrefix(rest, "https://") + "/v1/openapi.json"); err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Fatal("the TLS REST API answered plain HTTP")
		}
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"central", "--fleet-ca", "../../central/verify/testdata/fleet-ca.pem", "--data", t.TempDir(),
		"--rest-tls-cert", certFile}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "go together") {
		t.Fatalf("--rest-tls-cert alone: exit %d, %s", code, errOut.String())
	}
}
