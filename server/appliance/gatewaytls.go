package appliance

import "crypto/tls"

// gatewayTLS is the gateway listener's TLS configuration: cfg, offering
// HTTP/1.1 only (ALPN), at least TLS 1.2. The edge's bounds (requests in
// flight, write stalls, unread bodies answered with Connection: close)
// are built and tested for HTTP/1.1 connections, where a request is a
// connection's only one at a time; the OpenAI SDKs speak HTTP/1.1 to a
// server that offers nothing else.
func gatewayTLS(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	c.NextProtos = []string{"http/1.1"}
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}
