package appliance

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/testpki"
)

// listServices asks server reflection for the services served.
func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	// A Send that finds the stream already ended by the server (a method
	// it does not serve) returns io.EOF; the status is Recv's.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	return names, nil
}

// TestGRPCHealthAndReflection: both are served by default, to callers
// without any credential; each can be turned off on its own.
func TestGRPCHealthAndReflection(t *testing.T) {
	all := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
		"tollgate.audit.v1.AuditService", "tollgate.inference.v1.InferenceService", "tollgate.keys.v1.KeysService", "tollgate.policy.v1.PolicyService"}
	for _, c := range []struct {
		name                   string
		noHealth, noReflection bool
	}{
		{"default", false, false},
		{"health off", true, false},
		{"reflection off", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := startGRPCAppliance(t, func(cfg *Config) { cfg.DisableGRPCHealth, cfg.DisableGRPCReflection = c.noHealth, c.noReflection })
			conn := dialGRPC(t, a.addrs.GRPC, a.ca, nil)
			ctx := context.Background()

			r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			switch {
			case c.noHealth && status.Code(err) != codes.Unimplemented:
				t.Errorf("health off: %v %v", r, err)
			case !c.noHealth && (err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING):
				t.Errorf("health: %v %v", r, err)
			}
			if !c.noHealth {
				// Each service has its status too; an unknown one is
				// NOT_FOUND.
				r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "tollgate.keys.v1.KeysService"})
				if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Errorf("health of KeysService: %v %v", r, err)
				}
				if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "no.Such"}); status.Code(err) != codes.NotFound {
					t.Errorf("health of an unknown service: %v", err)
				}
			}

			names, err := listServices(ctx, conn)
			want := slices.DeleteFunc(slices.Clone(all), func(s string) bool {
				return c.noHealth && strings.HasPrefix(s, "grpc.health")
			})
			switch {
			case c.noReflection && status.Code(err) != codes.Unimplemented:
				t.Errorf("reflection off: %v %v", names, err)
			case !c.noReflection && (err != nil || !slices.Equal(names, want)):
				t.Errorf("reflection lists %v (%v), want %v", names, err, want)
			}
		})
	}
}

// TestGRPCHealthAtShutdown: a stopping appliance tells its health
// watchers NOT_SERVING, then ends their watches, which would otherwise
// hold its graceful stop.
func TestGRPCHealthAtShutdown(t *testing.T) {
	a := startGRPCAppliance(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	watch, err := healthpb.NewHealthClient(dialGRPC(t, a.addrs.GRPC, a.ca, nil)).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v %v", r, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch while stopping: %v %v", r, err)
	}
	if r, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("watch at the stop: %v %v, want UNAVAILABLE", r, err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestGRPCHealthFollowsTheAppliance: NOT_SERVING until the key cache has
// loaded and while the appliance is unhealthy; Check answers at once,
// watchers are told.
func TestGRPCHealthFollowsTheAppliance(t *testing.T) {
	ready := make(chan struct{})
	var healthy atomic.Bool
	healthy.Store(true)
	var logs lockedbuf.Buffer
	h := newGRPCHealth([]string{"tollgate.keys.v1.KeysService"}, ready, func() (bool, string) {
		if healthy.Load() {
			return true, "ok"
		}
		return false, "limits: etcd unreachable"
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	running := make(chan error, 1)
	go func() { running <- h.run(ctx) }()
	cli := healthpb.NewHealthClient(grpctest.Serve(t, func(s grpc.ServiceRegistrar) { healthpb.RegisterHealthServer(s, h) }))
	checks := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, svc := range []string{"", "tollgate.keys.v1.KeysService"} {
			if r, err := cli.Check(ctx, &healthpb.HealthCheckRequest{Service: svc}); err != nil || r.GetStatus() != want {
				t.Fatalf("Check(%q): %v %v, want %s", svc, r, err, want)
			}
		}
	}
	watch, err := cli.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		if r, err := watch.Recv(); err != nil || r.GetStatus() != want {
			t.Fatalf("watch: %v %v, want %s", r, err, want)
		}
	}
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	checks(healthpb.HealthCheckResponse_NOT_SERVING)
	close(ready)
	next(healthpb.HealthCheckResponse_SERVING)
	checks(healthpb.HealthCheckResponse_SERVING)
	healthy.Store(false)
	checks(healthpb.HealthCheckResponse_NOT_SERVING)
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	healthy.Store(true)
	next(healthpb.HealthCheckResponse_SERVING)
	if !strings.Contains(logs.String(), `msg="gRPC health changed" status=NOT_SERVING detail="limits: etcd unreachable"`) {
		t.Errorf("the change is not logged:\n%s", logs.String())
	}
	h.draining()
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	healthy.Store(true)
	checks(healthpb.HealthCheckResponse_NOT_SERVING) // for good
	cancel()
	if err := <-running; err != nil {
		t.Fatal(err)
	}
}

// TestGRPCCertificateRenewal: a renewed certificate written over the
// files is served from the next connection on, without a restart.
func TestGRPCCertificateRenewal(t *testing.T) {
	a := startGRPCAppliance(t, nil)
	check := func(ca *testpki.CA) error {
		_, err := healthpb.NewHealthClient(dialGRPC(t, a.addrs.GRPC, ca, nil)).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(a.ca); err != nil {
		t.Fatal(err)
	}
	renewed := testpki.NewCA(t, "renewing CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	renewed.WriteServer(t, certFile, keyFile)
	for from, to := range map[string]string{keyFile: a.keyFile, certFile: a.certFile} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(renewed); err != nil {
		t.Fatalf("a client trusting only the renewed certificate: %v", err)
	}
	if err := check(a.ca); status.Code(err) != codes.Unavailable {
		t.Fatalf("a client trusting only the old certificate: %v, want UNAVAILABLE", err)
	}
}

// TestGRPCListenerChecks: a plain-text listener off loopback is refused
// unless GRPCInsecure says so, and operators need client certificates to
// be verified; each refusal comes before anything is bound.
func TestGRPCListenerChecks(t *testing.T) {
	ca := testpki.NewCA(t, "site CA")
	server := &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"plain off loopback", Config{GRPCAddr: "0.0.0.0:0"}, `serves "0.0.0.0:0" without TLS`},
		{"plain on every address", Config{GRPCAddr: ":0"}, `serves ":0" without TLS`},
		{"not an address", Config{GRPCAddr: "localhost"}, `gRPC address "localhost"`},
		{"operators without TLS", Config{GRPCAddr: "127.0.0.1:0", GRPCOperators: []string{"ops"}}, "operators need TLS with client CAs"},
		{"operators without client CAs", Config{GRPCAddr: "127.0.0.1:0", GRPCTLS: server, GRPCOperators: []string{"ops"}}, "operators need TLS with client CAs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.GatewayAddr, c.cfg.Etcd, c.cfg.Logger = "127.0.0.1:0", etcdtest.Client(t), slog.New(slog.DiscardHandler)
			c.cfg.OnReady = func(Addrs) { t.Error("reported up") }
			if err := Run(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want %q", err, c.want)
			}
		})
	}

	// Said so, it serves, with a warning.
	var logs lockedbuf.Buffer
	addrs, stop := run(t, Config{GatewayAddr: "127.0.0.1:0", GRPCAddr: "0.0.0.0:0", GRPCInsecure: true, Etcd: etcdtest.Client(t),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !regexp.MustCompile(`level=WARN msg="the gRPC listener serves plain text off loopback[^"]*" addr=0.0.0.0:0`).MatchString(logs.String()) {
		t.Errorf("no warning:\n%s", logs.String())
	}
	if !strings.HasPrefix(addrs.GRPC, "0.0.0.0:") && !strings.HasPrefix(addrs.GRPC, "[::]:") {
		t.Errorf("gRPC on %s", addrs.GRPC)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
