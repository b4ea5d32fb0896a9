package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
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
// http:// ones. It refuses a mix of the two, and TLS flags for endpoints
// that do not use TLS, rather than send the key store's traffic in the
// clear while the operator meant it not to be.
func (e *etcdFlags) tlsConfig() (*tls.Config, error) {
	eps := e.list()
	tlsFlags := e.ca != "" || e.cert != "" || e.key != ""
	if len(eps) == 0 {
		if tlsFlags {
			return nil, errors.New("--etcd-ca, --etcd-cert and --etcd-key need --etcd-endpoints")
		}
		return nil, nil
	}
	secure := 0
	for _, ep := range eps {
		switch {
		case strings.HasPrefix(ep, "https://"):
			secure++
		case strings.HasPrefix(ep, "http://"):
		default:
			return nil, fmt.Errorf("--etcd-endpoints: %q is not an http:// or https:// URL", ep)
		}
	}
	switch {
	case secure != 0 && secure != len(eps):
		return nil, errors.New("--etcd-endpoints mixes http:// and https:// URLs: use https:// for every member")
	case secure == 0 && tlsFlags:
		return nil, errors.New("--etcd-ca, --etcd-cert and --etcd-key are for https:// endpoints; --etcd-endpoints has http:// ones")
	case secure == 0:
		return nil, nil
	case (e.cert == "") != (e.key == ""):
		return nil, errors.New("--etcd-cert and --etcd-key go together")
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

// dial connects to the endpoints (flags checked by tlsConfig).
func (e *etcdFlags) dial() (*clientv3.Client, error) {
	cfg, err := e.tlsConfig()
	if err != nil {
		return nil, err
	}
	return dialEtcd(e.list(), cfg)
}

// dialEtcd connects to etcd at endpoints, over TLS when tlsCfg is set.
func dialEtcd(endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsCfg,
		DialTimeout: 10 * time.Second,
		// The etcd client logs through zap; Tollgate logs what matters
		// itself, with context.
		Logger: zapNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	return cli, nil
}
