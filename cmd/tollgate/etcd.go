package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdFlags are how a command reaches an etcd cluster: its client URLs
// and, for a cluster that serves TLS (https:// URLs), the CA its
// certificates chain to and the client certificate it asks for when it
// runs with --client-cert-auth. Keys, limits and counters travel on this
// connection, so a production cluster serves TLS.
type etcdFlags struct {
	endpoints     string
	ca, cert, key string
}

func (e *etcdFlags) register(fs *flag.FlagSet, endpointsUsage string) {
	fs.StringVar(&e.endpoints, "etcd-endpoints", "", endpointsUsage)
	fs.StringVar(&e.ca, "etcd-ca", "", "PEM `FILE` of the CA certificates the etcd servers' certificates must chain to, for https:// endpoints (default: the system's)")
	fs.StringVar(&e.cert, "etcd-cert", "", "PEM `FILE` of the client certificate to present to etcd (its --client-cert-auth), with --etcd-key")
	fs.StringVar(&e.key, "etcd-key", "", "PEM `FILE` of the key of --etcd-cert")
}

// tlsArgs is the TLS flags as given, for a command line shown to the
// operator: " --etcd-ca FILE ..." or "".
func (e *etcdFlags) tlsArgs() string {
	var b strings.Builder
	for _, f := range []struct{ name, value string }{{"--etcd-ca", e.ca}, {"--etcd-cert", e.cert}, {"--etcd-key", e.key}} {
		if f.value != "" {
			b.WriteString(" " + f.name + " " + f.value)
		}
	}
	return b.String()
}

// list returns the endpoints, empty ones dropped.
func (e *etcdFlags) list() []string {
	var out []string
	for _, s := range strings.Split(e.endpoints, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// tlsConfig returns the TLS configuration of https:// endpoints, nil for
// endpoints without TLS (http://, unix:// or host:port). It refuses a mix
// of the two, and TLS flags for endpoints that do not use TLS, rather than
// send the key store's traffic in the clear while the operator meant it
// not to be.
func (e *etcdFlags) tlsConfig() (*tls.Config, error) {
	eps := e.list()
	tlsFlags := e.ca != "" || e.cert != "" || e.key != ""
	if len(eps) == 0 {
		if tlsFlags {
			return nil, flagsErr("--etcd-ca, --etcd-cert and --etcd-key need --etcd-endpoints")
		}
		return nil, nil
	}
	secure := 0
	for _, ep := range eps {
		scheme, _, found := strings.Cut(ep, "://")
		switch {
		case found && scheme == "https":
			secure++
		case !found, scheme == "http", scheme == "unix":
			// host:port without a scheme is plain HTTP to etcd's client.
		default:
			return nil, flagsErr("--etcd-endpoints: %q is not an http://, https:// or unix:// URL, or host:port", ep)
		}
	}
	switch {
	case secure != 0 && secure != len(eps):
		return nil, flagsErr("--etcd-endpoints mixes URLs with and without TLS: use https:// for every member")
	case secure == 0 && tlsFlags:
		return nil, flagsErr("--etcd-ca, --etcd-cert and --etcd-key are for https:// endpoints; --etcd-endpoints has ones without TLS")
	case secure == 0:
		return nil, nil
	case (e.cert == "") != (e.key == ""):
		return nil, flagsErr("--etcd-cert and --etcd-key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.ca != "" {
		pem, err := os.ReadFile(e.ca)
		if err != nil {
			return nil, fmt.Errorf("--etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-ca: %s holds no PEM certificate", e.ca)
		}
		cfg.RootCAs = pool
	}
	if e.cert != "" {
		pair, err := tls.LoadX509KeyPair(e.cert, e.key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert, --etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dialEtcd connects to etcd at endpoints, over TLS when tlsCfg is set.
func dialEtcd(endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsCfg,
		DialTimeout: 10 * time.Second,
		// A member that hangs (a stopped process, a cut-off machine)
		// keeps its connection open and answers nothing; without pings
		// the client keeps sending it a share of the limits' grants,
		// each of which waits out its deadline, and every gateway flaps
		// into 503 although the cluster has quorum. Pings find it dead
		// within 13 s (gRPC allows no interval under 10 s; etcd refuses
		// pings more often than every 5 s).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// The etcd client logs through zap; Tollgate logs what matters
		// itself, with context.
		Logger: zapNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	return cli, nil
}
