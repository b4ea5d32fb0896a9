package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestGatewayTLS: with a certificate the gateway serves HTTPS on
// HTTP/1.1, and the official SDK works against it with only its base URL
// and a client trusting the certificate; plain HTTP on the same port is
// not served.
func TestGatewayTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	d := startCommand(t, newOutputs(), "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--portal-addr", "", "--central-addr", "", "--gateway-tls-cert", certFile, "--gateway-tls-key", keyFile)
	base := d.match(t, `Base URL:\s+(https://\S+/v1)`)
	key := d.match(t, `Demo key:\s+(tgk_\S+)`)

	chatOverTLS(t, base, key, "hello over tls", pool)

	// A renewed certificate, written over the files, is served from the
	// next connection on, without a restart: a client trusting only the
	// new one gets through.
	renewedCert, renewedKey, renewedPool := writeSelfSigned(t)
	for from, to := range map[string]string{renewedKey: keyFile, renewedCert: certFile} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	chatOverTLS(t, base, key, "hello after the renewal", renewedPool)

	// Plain HTTP to the TLS port gets no answer of the gateway's.
	host := strings.TrimSuffix(strings.TrimPrefix(base, "https://"), "/v1")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if plain, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Fatal("the TLS gateway answered plain HTTP")
		}
	}
}

// chatOverTLS asks builtin/echo for content with openai-go, trusting
// pool, and checks the reply and that it came over HTTP/1.1 and TLS
// although the client would take HTTP/2 if offered.
func chatOverTLS(t *testing.T, base, key, content string, pool *x509.CertPool) {
	t.Helper()
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(transport.CloseIdleConnections)
	cl := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: transport}))
	var resp *http.Response
	c, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "builtin/echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != content {
		t.Errorf("reply %q, want %q", c.Choices[0].Message.Content, content)
	}
	if resp.ProtoMajor != 1 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "http/1.1" {
		t.Errorf("served %s over %+v; want HTTP/1.1 over TLS (ALPN http/1.1)", resp.Proto, resp.TLS)
	}
}

// TestGatewayTLSFlags: the certificate and its key go together, and one
// that cannot be loaded stops the start.
func TestGatewayTLSFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--gateway-tls-cert", "cert.pem"}, 2, "--gateway-tls-cert and --gateway-tls-key go together"},
		{[]string{"--gateway-tls-key", "key.pem"}, 2, "--gateway-tls-cert and --gateway-tls-key go together"},
		{[]string{"--gateway-tls-cert", "none.pem", "--gateway-tls-key", "none-key.pem"}, 1, "none.pem"},
	} {
		var out, errOut strings.Builder
		args := append([]string{"dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
			"--portal-addr", "", "--central-addr", ""}, c.args...)
		if code := run(context.Background(), args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}
