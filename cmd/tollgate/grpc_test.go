package main

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/testpki"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// grpcPKI is a site CA with the gRPC listener's certificate and key in
// files, and the CA in a file for --grpc-client-ca.
type grpcPKI struct {
	ca                        *testpki.CA
	certFile, keyFile, caFile string
}

func newGRPCPKI(t *testing.T) grpcPKI {
	t.Helper()
	dir := t.TempDir()
	p := grpcPKI{ca: testpki.NewCA(t, "site CA"), certFile: filepath.Join(dir, "grpc.pem"), keyFile: filepath.Join(dir, "grpc-key.pem"), caFile: filepath.Join(dir, "ca.pem")}
	p.ca.WriteServer(t, p.certFile, p.keyFile)
	p.ca.WriteCA(t, p.caFile)
	return p
}

// dialTLS connects to addr over TLS trusting ca, with cert when set.
func dialTLS(t *testing.T, addr string, ca *testpki.CA, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestGRPCFlags: flags of the gRPC listener that do not go together, and a
// plain-text listener off loopback without --grpc-insecure, are refused
// with one line and exit status 2 before the data directory is made; a
// file that cannot be used is exit status 1.
func TestGRPCFlags(t *testing.T) {
	p := newGRPCPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--grpc-tls-cert", p.certFile, "--grpc-tls-key", p.keyFile}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"plain off loopback", []string{"--grpc-addr", "0.0.0.0:0"}, 2, "--grpc-addr 0.0.0.0:0 is not a loopback address: serve it over TLS"},
		{"plain on every address", []string{"--grpc-addr", ":9090"}, 2, "--grpc-addr :9090 is not a loopback address"},
		{"certificate without key", []string{"--grpc-tls-cert", p.certFile}, 2, "--grpc-tls-cert and --grpc-tls-key go together"},
		{"key without certificate", []string{"--grpc-tls-key", p.keyFile}, 2, "--grpc-tls-cert and --grpc-tls-key go together"},
		{"insecure with TLS", append([]string{"--grpc-insecure"}, tlsArgs...), 2, "--grpc-insecure and --grpc-tls-cert do not go together"},
		{"client CA without TLS", []string{"--grpc-client-ca", p.caFile}, 2, "--grpc-client-ca needs --grpc-tls-cert"},
		{"operator without client CA", append([]string{"--grpc-operator", "ops"}, tlsArgs...), 2, "--grpc-operator needs --grpc-client-ca"},
		{"empty operator", []string{"--grpc-operator", " "}, 2, "must not be empty"},
		{"certificate missing", []string{"--grpc-tls-cert", "none.pem", "--grpc-tls-key", "none-key.pem"}, 1, "none.pem"},
		{"client CA missing", append([]string{"--grpc-client-ca", "none-ca.pem"}, tlsArgs...), 1, "none-ca.pem"},
		{"client CA without a certificate", append([]string{"--grpc-client-ca", notPEM}, tlsArgs...), 1, "no PEM certificate"},
	} {
		for _, command := range []string{"dev", "gateway"} {
			t.Run(c.name+"/"+command, func(t *testing.T) {
				data := filepath.Join(t.TempDir(), "data")
				args := []string{"dev", "--data", data, "--portal-addr", "", "--central-addr", ""}
				if command == "gateway" {
					args = []string{"gateway", "--data", data, "--etcd-endpoints", "http://127.0.0.1:1", "--policy", "../../examples/policy"}
				}
				args = append(append(args, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"), c.args...)
				code, _, stderr := runGuarded(t, args)
				if code != c.code || !strings.Contains(stderr, c.want) {
					t.Fatalf("exit %d, %q; want %d and %q", code, stderr, c.code, c.want)
				}
				if c.code == 2 && c.name != "empty operator" && strings.Count(stderr, "\n") != 1 {
					t.Errorf("not one line: %q", stderr)
				}
				if _, err := os.Stat(data); !os.IsNotExist(err) {
					t.Errorf("the data directory was made (%v)", err)
				}
			})
		}
	}
}

// TestDevGRPC: `tollgate dev` with a certificate, a client CA and an
// operator serves gRPC over TLS. The operator creates a key over
// KeysService, which the gateway then takes; an anonymous caller and the
// key itself are refused KeysService; the demo tenant's audit token reads
// its audit trail over AuditService and no other tenant's. Health and
// reflection answer anyone; a renewed certificate is served without a
// restart.
func TestDevGRPC(t *testing.T) {
	p := newGRPCPKI(t)
	data := t.TempDir()
	d := startCommand(t, newOutputs(), "dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--portal-addr", "", "--central-addr", "", "--grpc-tls-cert", p.certFile, "--grpc-tls-key", p.keyFile,
		"--grpc-client-ca", p.caFile, "--grpc-operator", "ops", "--grpc-operator", "spiffe://example.com/ci")
	addr := d.match(t, `gRPC:\s+(\S+) \(TLS\)`)
	base := d.match(t, `Base URL:\s+(http://\S+)/v1`)
	ctx := context.Background()

	op := p.ca.Client(t, testpki.Names{CommonName: "ci-runner", URIs: []string{"spiffe://example.com/ci"}})
	opKeys := keysv1.NewKeysServiceClient(dialTLS(t, addr, p.ca, &op))
	created, err := opKeys.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "demo", Label: "over-grpc", AllModels: true})
	if err != nil {
		t.Fatalf("CreateKey as an operator: %v", err)
	}
	// The gateway's key cache has the key once AuthenticateKey, which
	// reads the same cache, finds it.
	pollFor(t, "the new key in the key cache", func() bool {
		_, err := opKeys.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: created.GetSecret()})
		return err == nil
	})
	webtest.Chat(t, base, created.GetSecret(), "hello")

	anonymous := dialTLS(t, addr, p.ca, nil)
	keysCli := keysv1.NewKeysServiceClient(anonymous)
	if _, err := keysCli.ListKeys(ctx, &keysv1.ListKeysRequest{TenantId: "demo"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListKeys without a credential: %v", err)
	}
	withKey := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+created.GetSecret())
	if _, err := keysCli.AuthenticateKey(withKey, &keysv1.AuthenticateKeyRequest{Secret: created.GetSecret()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("AuthenticateKey with a virtual key: %v", err)
	}

	token, err := os.ReadFile(filepath.Join(data, "central", "demo-audit-token"))
	if err != nil {
		t.Fatal(err)
	}
	withToken := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(token)))
	auditCli := auditv1.NewAuditServiceClient(anonymous)
	if _, err := auditCli.ListHeads(withToken, &auditv1.ListHeadsRequest{TenantId: "demo", Day: "2026-03-01"}); err != nil {
		t.Errorf("ListHeads with the demo tenant's audit token: %v", err)
	}
	if _, err := auditCli.ListHeads(withToken, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ListHeads of another tenant: %v", err)
	}

	if r, err := healthpb.NewHealthClient(anonymous).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v %v", r, err)
	}
	if _, err := reflectionpb.NewServerReflectionClient(anonymous).ServerReflectionInfo(ctx); err != nil {
		t.Errorf("reflection: %v", err)
	}

	renewed := testpki.NewCA(t, "renewing CA")
	dir := t.TempDir()
	renewed.WriteServer(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	for from, to := range map[string]string{filepath.Join(dir, "key.pem"): p.keyFile, filepath.Join(dir, "cert.pem"): p.certFile} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := healthpb.NewHealthClient(dialTLS(t, addr, renewed, nil)).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("a client trusting only the renewed certificate: %v", err)
	}
}

// TestDevGRPCHealthAndReflectionOff: --grpc-health=false and
// --grpc-reflection=false leave both unserved; --grpc-insecure serves
// plain text off loopback.
func TestDevGRPCHealthAndReflectionOff(t *testing.T) {
	d := startCommand(t, newOutputs(), "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "0.0.0.0:0",
		"--grpc-insecure", "--portal-addr", "", "--central-addr", "", "--grpc-health=false", "--grpc-reflection=false")
	addr := d.match(t, `gRPC:\s+(\S+)\n`)
	addr = "127.0.0.1" + addr[strings.LastIndex(addr, ":"):]
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("health off: %v", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("reflection off: %v", err)
	}
}

// TestGatewayAuditTokens: the gateway's AuditService answers the tokens
// of --audit-tokens, in the central plane's format, for their tenant only.
func TestGatewayAuditTokens(t *testing.T) {
	dir := t.TempDir()
	_, appDir := issueAppliance(t, dir, "app_cmdgrpc")
	tokens := filepath.Join(dir, "audit-tokens.yaml")
	if err := os.WriteFile(tokens, []byte("acme: [\"tga_cmd_grpc_acme\"]\nglobex: [\"tga_cmd_grpc_globex\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startCommand(t, newOutputs(), "gateway", "--etcd-endpoints", strings.Join(etcdtest.Endpoints(t), ","), "--data", appDir,
		"--policy", "../../examples/policy", "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--audit-tokens", tokens)
	conn, err := grpc.NewClient(g.match(t, `gRPC:\s+(\S+)`), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := auditv1.NewAuditServiceClient(conn)
	for _, c := range []struct {
		token string
		want  codes.Code
	}{
		{"", codes.Unauthenticated},
		{"tga_cmd_grpc_acme", codes.OK},
		{"tga_cmd_grpc_globex", codes.PermissionDenied},
		{"tga_unknown_token", codes.Unauthenticated},
	} {
		ctx := context.Background()
		if c.token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
		}
		if _, err := cli.ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01"}); status.Code(err) != c.want {
			t.Errorf("token %q: %v, want %s", c.token, err, c.want)
		}
	}

	code, _, stderr := runGuarded(t, []string{"gateway", "--etcd-endpoints", "http://127.0.0.1:1", "--data", t.TempDir(), "--policy", "../../examples/policy",
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--audit-tokens", filepath.Join(dir, "none.yaml")})
	if code != 1 || !strings.Contains(stderr, "--audit-tokens") || !strings.Contains(stderr, "none.yaml") {
		t.Errorf("a tokens file that is not there: exit %d, %q", code, stderr)
	}
}
