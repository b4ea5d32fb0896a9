package centraltest

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// Plane is a central plane running on loopback for a test.
type Plane struct {
	Addrs central.Addrs
	// BaseURL is the REST base, http://host:port.
	BaseURL string
	Fleet   *Fleet
	Store   store.Store
	Tokens  *auth.Tokens
	// ServerCertPEM is the ingest listener's self-signed certificate.
	ServerCertPEM []byte

	stop func() error
}

// Stop stops the plane as a signal would (its Run's context ends) and
// returns what Run returned; it fails the test if Run has not returned
// after a minute. The test's cleanup stops the plane too.
func (p *Plane) Stop(tb testing.TB) error {
	tb.Helper()
	return p.stop()
}

// StartPlane runs a central plane with an embedded store in a temporary
// directory and a fleet of its own, until the test ends.
func StartPlane(tb testing.TB) *Plane {
	tb.Helper()
	return StartPlaneWith(tb, nil)
}

// StartPlaneWith is StartPlane with tweak applied to the plane's
// configuration before it starts (a clock, retention ticks, a logger).
func StartPlaneWith(tb testing.TB, tweak func(*central.Config)) *Plane {
	tb.Helper()
	st, err := boltstore.Open(filepath.Join(tb.TempDir(), "central.db"))
	if err != nil {
		tb.Fatal(err)
	}
	p := &Plane{Fleet: NewFleet(tb), Store: st, Tokens: auth.NewTokens()}
	cert, certPEM, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	p.ServerCertPEM = certPEM
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan central.Addrs, 1)
	done := make(chan error, 1)
	cfg := central.Config{
		Store: st, Tokens: p.Tokens, FleetCA: p.Fleet.CA.Cert, IngestCert: cert,
		RESTAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", IngestAddr: "127.0.0.1:0",
	}
	if tweak != nil {
		tweak(&cfg)
	}
	cfg.OnReady = func(a central.Addrs) { ready <- a }
	go func() { done <- central.Run(ctx, cfg) }()
	var once sync.Once
	var runErr error
	p.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(time.Minute): // a hang guard, not a timing
				runErr = errors.New("central.Run did not return a minute after its context ended")
			}
			_ = st.Close()
		})
		return runErr
	}
	tb.Cleanup(func() {
		if err := p.stop(); err != nil {
			tb.Errorf("central.Run: %v", err)
		}
	})
	select {
	case p.Addrs = <-ready:
	case err := <-done:
		tb.Fatalf("central.Run: %v", err)
	}
	p.BaseURL = "http://" + p.Addrs.REST
	return p
}

// IngestClient dials the ingest listener as app (mTLS).
func (p *Plane) IngestClient(tb testing.TB, app *fleet.Appliance) centralv1.CentralAuditServiceClient {
	tb.Helper()
	return centralv1.NewCentralAuditServiceClient(p.IngestConn(tb, app))
}

// IngestConn is IngestClient's connection, for a test that closes it or
// dials with options of its own (extra); the test's cleanup closes it too.
func (p *Plane) IngestConn(tb testing.TB, app *fleet.Appliance, extra ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		tb.Fatal(err)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(app, roots, "127.0.0.1")))}, extra...)
	conn, err := grpc.NewClient(p.Addrs.Ingest, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// QueryClient dials the gRPC query listener, sending token (none when
// empty) with every call.
func (p *Plane) QueryClient(tb testing.TB, token string) centralv1.AuditQueryServiceClient {
	tb.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	conn, err := grpc.NewClient(p.Addrs.GRPC, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return centralv1.NewAuditQueryServiceClient(conn)
}

// bearer sends an audit token; it allows plaintext (loopback tests).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
