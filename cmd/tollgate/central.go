package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
)

// Files of the central plane's data directory.
const (
	centralDBFile      = "central.db"
	centralCertFile    = "central-ingest.pem"
	centralCertKeyFile = "central-ingest-key.pem"
)

// runCentral runs the central plane alone (docs/central.md).
func runCentral(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate central", flag.ContinueOnError)
	fs.SetOutput(stderr)
	caFile := fs.String("fleet-ca", "", "PEM of the fleet CA that issues appliance certificates (required)")
	tokensFile := fs.String("audit-tokens", "", "YAML file mapping tenant ids to their audit tokens (tenant: [tga_...])")
	data := fs.String("data", ".tollgate-central", "directory of the embedded store and the generated ingest certificate")
	storeKind := fs.String("store", "bolt", "store: bolt (embedded, in --data) or postgres")
	dsn := fs.String("postgres", "", "PostgreSQL connection string, with --store postgres")
	schema := fs.String("postgres-schema", "tollgate_central", "PostgreSQL schema of the tables, with --store postgres")
	restAddr := fs.String("rest-addr", "127.0.0.1:8090", "REST audit API listen address")
	restCert := fs.String("rest-tls-cert", "", "PEM certificate `FILE` (chain) to serve the REST audit API over HTTPS, with --rest-tls-key")
	restKey := fs.String("rest-tls-key", "", "PEM private key `FILE` of --rest-tls-cert")
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:8092", "gRPC AuditQueryService listen address (the REST gateway dials it)")
	ingestAddr := fs.String("ingest-addr", "127.0.0.1:8091", "gRPC CentralAuditService listen address, mTLS with appliance certificates")
	certFile := fs.String("tls-cert", "", "ingest server certificate (PEM); default: a self-signed one kept in --data")
	keyFile := fs.String("tls-key", "", "key of --tls-cert (PEM)")
	hosts := fs.String("ingest-hosts", "127.0.0.1,localhost", "names and addresses of the self-signed ingest certificate")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (empty: off)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	grace := central.DefaultShutdownGrace
	fs.Var(durationFlag{p: &grace, zero: true}, "shutdown-grace", "after SIGINT or SIGTERM, how long the queries and appliance uploads in flight may take "+
		"to finish before they are cut; a `duration`, 0 cuts them at once. A second signal kills the process")
	var drain time.Duration
	fs.Var(durationFlag{p: &drain, zero: true}, "shutdown-drain", "after SIGINT or SIGTERM, how long to keep serving with GET /healthz answering 503 "+
		"before the listeners close, so that a load balancer moves traffic away first; a `duration`, 0 (the default) closes them at once")
	maxUploads, maxPending := int64(service.DefaultMaxUploads), int64(service.DefaultMaxPendingLeaves)
	fs.Var(positiveInt{p: &maxUploads}, "ingest-max-uploads", "how many appliance uploads may be in progress at once; one more is refused as busy and retried by its appliance")
	fs.Var(positiveInt{p: &maxPending}, "ingest-max-pending-leaves", "how many leaves the uploads in progress may hold together, the memory they use "+
		"(docs/central.md); one that would pass it is refused as busy and retried. At least 4194304, the largest upload")
	maxConns := int64(central.DefaultIngestMaxConns)
	fs.Var(positiveInt{p: &maxConns}, "ingest-max-conns", "how many connections the ingest listener keeps open at once (appliances keep one each); "+
		"one more is closed as soon as it is accepted, and its appliance retries")
	maxConnsPerHost := int64(central.DefaultIngestMaxConnsPerHost)
	fs.Var(positiveInt{p: &maxConnsPerHost}, "ingest-max-conns-per-host", "how many of those connections one IP address may hold "+
		"(appliances behind one NAT address share it); one more from it is closed as soon as it is accepted")
	maxUploadTime := service.DefaultMaxUploadTime
	fs.Var(durationFlag{p: &maxUploadTime}, "ingest-max-upload-time", "how long an appliance upload may take to arrive, however steadily it sends "+
		"(docs/central.md); one that takes longer is ended and retried by its appliance. A `duration` above 0")
	restWriteTimeout := central.DefaultRESTWriteTimeout
	fs.Var(durationFlag{p: &restWriteTimeout}, "rest-write-timeout", "how long a REST request may take from the end of its headers to the end of its answer; "+
		"a client that reads its answer more slowly has its connection closed (docs/central.md). A `duration` above 0")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if *caFile == "" {
		return flagsErr("--fleet-ca is required")
	}
	if (*restCert == "") != (*restKey == "") {
		return flagsErr("--rest-tls-cert and --rest-tls-key go together")
	}
	if maxPending < service.DefaultMaxLeaves {
		return flagsErr("--ingest-max-pending-leaves: %d pending leaves cannot hold an upload of %d leaves", maxPending, service.DefaultMaxLeaves)
	}
	lock, err := lockDataDir(*data)
	if err != nil {
		return err
	}
	defer lock.Close()
	ca, err := fleet.LoadCACert(*caFile)
	if err != nil {
		return err
	}
	tokens := auth.NewTokens()
	if *tokensFile != "" {
		if tokens, err = auth.LoadFile(*tokensFile); err != nil {
			return err
		}
	}
	var restTLS *tls.Config
	scheme := "http"
	if *restCert != "" {
		if restTLS, err = servedTLS("rest", *restCert, *restKey, logger); err != nil {
			return err
		}
		scheme = "https"
	}
	st, err := openCentralStore(ctx, *storeKind, *data, *dsn, *schema)
	if err != nil {
		return err
	}
	defer st.Close()
	cert, certPath, err := ingestCertificate(*data, *certFile, *keyFile, strings.Split(*hosts, ","))
	if err != nil {
		return err
	}
	return central.Run(ctx, central.Config{
		Store: st, Tokens: tokens, FleetCA: ca, IngestCert: cert,
		RESTAddr: *restAddr, RESTTLS: restTLS, GRPCAddr: *grpcAddr, IngestAddr: *ingestAddr, MetricsAddr: *metricsAddr,
		Logger:        logger.With(slog.String("component", "central")),
		ShutdownGrace: configGrace(grace), ShutdownDrain: drain,
		IngestMaxUploads: int(maxUploads), IngestMaxPendingLeaves: int(maxPending), IngestMaxConns: int(maxConns), IngestMaxConnsPerHost: int(maxConnsPerHost),
		IngestMaxUploadTime: maxUploadTime, RESTWriteTimeout: restWriteTimeout,
		OnReady: func(a central.Addrs) {
			fmt.Fprintf(stdout, "Tollgate central plane is up.\n  REST:    %s://%s/v1/tenants/{tenant_id}/audit/heads?day=YYYY-MM-DD\n"+
				"  OpenAPI: %s://%s/v1/openapi.json\n  gRPC:    %s\n  Ingest:  %s (mTLS; appliances trust %s)\n",
				scheme, a.REST, scheme, a.REST, a.GRPC, a.Ingest, certPath)
			if a.Metrics != "" {
				fmt.Fprintf(stdout, "  Metrics: http://%s/metrics\n", a.Metrics)
			}
		},
	})
}

func openCentralStore(ctx context.Context, kind, data, dsn, schema string) (store.Store, error) {
	switch kind {
	case "bolt":
		return boltstore.Open(filepath.Join(data, centralDBFile))
	case "postgres":
		if dsn == "" {
			return nil, flagsErr("--store postgres needs --postgres")
		}
		return pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
	}
	return nil, flagsErr("--store %q: want bolt or postgres", kind)
}

// ingestCertificate loads --tls-cert and --tls-key, or the self-signed
// certificate of the data directory, made on first start. It returns the
// certificate and the file appliances trust.
func ingestCertificate(data, certFile, keyFile string, hosts []string) (tls.Certificate, string, error) {
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		return cert, certFile, nil
	}
	certFile, keyFile = filepath.Join(data, centralCertFile), filepath.Join(data, centralCertKeyFile)
	if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
		if _, err := tlsconf.WriteSelfSigned(certFile, keyFile, hosts...); err != nil {
			return tls.Certificate{}, "", err
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("ingest certificate: %w", err)
	}
	return cert, certFile, nil
}
