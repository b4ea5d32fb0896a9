package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
)

// grpcFlags are the flags of the gRPC listener of dev and gateway
// (--grpc-addr is commonFlags').
type grpcFlags struct {
	certFile, keyFile string
	clientCA          string
	operators         nameList
	insecure          bool
	health            bool
	reflection        bool
	// tls is the listener's TLS configuration, once check has loaded it.
	tls *tls.Config
}

func (g *grpcFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.certFile, "grpc-tls-cert", "", "PEM certificate `FILE` (chain) to serve the gRPC listener over TLS, with --grpc-tls-key")
	fs.StringVar(&g.keyFile, "grpc-tls-key", "", "PEM private key `FILE` of --grpc-tls-cert")
	fs.StringVar(&g.clientCA, "grpc-client-ca", "", "PEM CA certificates `FILE`: a client certificate presented to the gRPC listener must chain to them (needs --grpc-tls-cert)")
	fs.Var(&g.operators, "grpc-operator", "an operator allowed KeysService and PolicyService: a `NAME` that a client certificate verified with --grpc-client-ca "+
		"must carry as its Subject CommonName or as a DNS, email or URI SAN; repeatable")
	fs.BoolVar(&g.insecure, "grpc-insecure", false, "serve the gRPC listener in plain text on a non-loopback --grpc-addr (audit tokens and virtual keys then cross the network in the clear)")
	fs.BoolVar(&g.health, "grpc-health", true, "serve the standard gRPC health service (grpc.health.v1) on the gRPC listener, to any caller")
	fs.BoolVar(&g.reflection, "grpc-reflection", true, "serve gRPC server reflection (for grpcurl) on the gRPC listener, to any caller")
}

// check refuses flags that do not go together (exit status 2), and loads
// the certificate and the client CA (a file that cannot be used: exit
// status 1). A renewed certificate is served from the next handshake on.
func (g *grpcFlags) check(addr string, logger *slog.Logger) error {
	switch {
	case (g.certFile == "") != (g.keyFile == ""):
		return flagsErr("--grpc-tls-cert and --grpc-tls-key go together")
	case g.insecure && g.certFile != "":
		return flagsErr("--grpc-insecure and --grpc-tls-cert do not go together")
	case g.clientCA != "" && g.certFile == "":
		return flagsErr("--grpc-client-ca needs --grpc-tls-cert: client certificates are verified over TLS only")
	case len(g.operators) > 0 && g.clientCA == "":
		return flagsErr("--grpc-operator needs --grpc-client-ca: operators are known by their client certificates")
	case g.certFile == "" && !g.insecure && !netaddr.IsLoopback(addr):
		return flagsErr("--grpc-addr %s is not a loopback address: serve it over TLS (--grpc-tls-cert, --grpc-tls-key), "+
			"or say --grpc-insecure on a network that protects it", addr)
	}
	if g.certFile == "" {
		return nil
	}
	cfg, err := servedTLS("grpc", g.certFile, g.keyFile, logger)
	if err != nil {
		return err
	}
	if g.clientCA != "" {
		pem, err := os.ReadFile(g.clientCA)
		if err != nil {
			return fmt.Errorf("--grpc-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--grpc-client-ca %s: no PEM certificate in it", g.clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	g.tls = cfg
	return nil
}

// apply sets the gRPC listener's part of an appliance configuration.
func (g *grpcFlags) apply(cfg *appliance.Config) {
	cfg.GRPCTLS = g.tls
	cfg.GRPCInsecure = g.insecure
	cfg.GRPCOperators = g.operators
	cfg.DisableGRPCHealth = !g.health
	cfg.DisableGRPCReflection = !g.reflection
}

// banner is the gRPC listener's address in an "is up" banner.
func (g *grpcFlags) banner(addr string) string {
	if g.certFile != "" {
		return addr + " (TLS)"
	}
	return addr
}

// nameList is a repeatable flag of non-empty names.
type nameList []string

func (l *nameList) String() string { return strings.Join(*l, ",") }

func (l *nameList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, v)
	return nil
}
