package appliance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/auth"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/certfile"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/testpki"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/policy"
)

const (
	acmeAuditToken   = "tga_test_acme_audit"
	globexAuditToken = "tga_test_globex_audit"
)

// grpcAppliance is an appliance serving gRPC over TLS, verifying client
// certificates of ca, with operator "ops", the audit tokens of tenants
// acme and globex, keys of both and two signed heads of acme's tree.
type grpcAppliance struct {
	addrs Addrs
	// ca issued the server certificate and the client certificates the
	// listener verifies.
	ca                *testpki.CA
	certFile, keyFile string
	logs              *lockedbuf.Buffer
	// stop stops the appliance and returns Run's error.
	stop func() error

	day                               string
	events                            []string // acme's request ids, one per head
	acmeKey, acmeKeyID, revokeKeyID   string
	revokedKey, expiredKey, globexKey string
}

// startGRPCAppliance runs an appliance as above; edit changes its
// configuration first.
func startGRPCAppliance(t *testing.T, edit func(*Config)) *grpcAppliance {
	t.Helper()
	ctx := context.Background()
	a := &grpcAppliance{ca: testpki.NewCA(t, "site CA"), logs: &lockedbuf.Buffer{}}
	dir := t.TempDir()
	a.certFile, a.keyFile = filepath.Join(dir, "grpc.pem"), filepath.Join(dir, "grpc-key.pem")
	a.ca.WriteServer(t, a.certFile, a.keyFile)
	pair, err := certfile.Load(a.certFile, a.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := pair.Config()
	tlsCfg.ClientCAs, tlsCfg.ClientAuth = a.ca.Pool(), tls.VerifyClientCertIfGiven

	cli := etcdtest.Client(t)
	store := keys.NewStore(cli, time.Now)
	mustCreate := func(tenant, label string, expire time.Time) (*keysv1.Key, string) {
		k, secret, err := store.Create(ctx, keys.Spec{TenantID: tenant, Label: label, AllModels: true, ExpireTime: expire})
		if err != nil {
			t.Fatal(err)
		}
		return k, secret
	}
	k, secret := mustCreate("acme", "main", time.Time{})
	a.acmeKey, a.acmeKeyID = secret, k.GetKeyId()
	k, _ = mustCreate("acme", "to-revoke", time.Time{})
	a.revokeKeyID = k.GetKeyId()
	k, a.revokedKey = mustCreate("acme", "revoked", time.Time{})
	if _, err := store.Revoke(ctx, "acme", k.GetKeyId()); err != nil {
		t.Fatal(err)
	}
	_, a.expiredKey = mustCreate("acme", "expired", time.Now().Add(-time.Hour))
	_, a.globexKey = mustCreate("globex", "main", time.Time{})

	tokens := auth.NewTokens()
	for tenant, token := range map[string]string{"acme": acmeAuditToken, "globex": globexAuditToken} {
		if err := tokens.SetAuditTokens(ctx, tenant, []string{token}); err != nil {
			t.Fatal(err)
		}
	}

	// acme's tree of the day, with a head after each of two events.
	now := time.Now().UTC().Truncate(time.Second)
	a.day = now.Format("2006-01-02")
	ca, err := fleet.NewCA("fleet CA", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_grpc")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(t.TempDir(), auditlog.Options{Signer: signer, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i, tenant := range []string{"acme", "globex", "acme"} {
		id := fmt.Sprintf("req_grpc%s%d", tenant, i)
		if _, err := l.Append(ctx, auditlog.Event{RequestID: id, TenantID: tenant, KeyID: "key_k", Time: now,
			Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200}); err != nil {
			t.Fatal(err)
		}
		if tenant == "acme" {
			a.events = append(a.events, id)
			if _, err := l.SignHeads(now); err != nil {
				t.Fatal(err)
			}
		}
	}

	pol, err := policy.Load(ctx, "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		GatewayAddr:   "127.0.0.1:0",
		GRPCAddr:      "127.0.0.1:0",
		GRPCTLS:       tlsCfg,
		GRPCOperators: []string{"ops"},
		AuditTokens:   tokens,
		Etcd:          cli,
		Policy:        pol,
		Audit:         l,
		ApplianceID:   "app_grpc",
		Logger:        slog.New(slog.NewTextHandler(a.logs, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	a.addrs, a.stop = run(t, cfg)
	return a
}

// run runs the appliance of cfg until the test ends, and returns its
// addresses once it is ready, and what stops it.
func run(t *testing.T, cfg Config) (Addrs, func() error) {
	t.Helper()
	ready := make(chan Addrs, 1)
	cfg.OnReady = func(a Addrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once atomic.Bool
	var runErr error
	stop := func() error {
		if once.CompareAndSwap(false, true) {
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a, stop
	case err := <-done:
		once.Store(true)
		t.Fatalf("Run ended before ready: %v", err)
	}
	return Addrs{}, nil
}

// dial connects to the appliance's gRPC listener over TLS, trusting ca,
// with client certificate cert when set.
func dialGRPC(t *testing.T, addr string, ca *testpki.CA, cert *tls.Certificate) *grpc.ClientConn {
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

// credential is what a caller presents: a client certificate, a bearer
// secret (authorization metadata), both or neither.
type credential int

const (
	noCredential credential = iota
	operatorCert
	otherCert      // verified, but not an operator's
	acmeAudit      // the tenant's audit token
	globexAudit    // another tenant's audit token
	acmeVirtualKey // the tenant's own (valid) virtual key
	globexVirtualKey
	revokedKey
	expiredKey
	credentials_
)

func (c credential) String() string {
	return [...]string{"no credential", "operator certificate", "another certificate", "the tenant's audit token",
		"another tenant's audit token", "the tenant's virtual key", "another tenant's virtual key",
		"a revoked virtual key", "an expired virtual key"}[c]
}

// The answers of the services to each credential: an operator's
// service, and a service of a tenant's auditor.
var (
	operatorOnly = map[credential]codes.Code{
		noCredential: codes.Unauthenticated, operatorCert: codes.OK, otherCert: codes.PermissionDenied,
		acmeAudit: codes.PermissionDenied, globexAudit: codes.PermissionDenied, acmeVirtualKey: codes.PermissionDenied,
		globexVirtualKey: codes.PermissionDenied, revokedKey: codes.PermissionDenied, expiredKey: codes.PermissionDenied,
	}
	// virtualKeyCaller: the InferenceService serves any valid virtual key
	// under its own tenant (a request names no tenant), and nothing else.
	virtualKeyCaller = map[credential]codes.Code{
		noCredential: codes.Unauthenticated, operatorCert: codes.Unauthenticated, otherCert: codes.Unauthenticated,
		acmeAudit: codes.Unauthenticated, globexAudit: codes.Unauthenticated, acmeVirtualKey: codes.OK,
		globexVirtualKey: codes.OK, revokedKey: codes.Unauthenticated, expiredKey: codes.Unauthenticated,
	}
	tenantAuditor = map[credential]codes.Code{
		noCredential: codes.Unauthenticated, operatorCert: codes.Unauthenticated, otherCert: codes.Unauthenticated,
		acmeAudit: codes.OK, globexAudit: codes.PermissionDenied, acmeVirtualKey: codes.Unauthenticated,
		globexVirtualKey: codes.Unauthenticated, revokedKey: codes.Unauthenticated, expiredKey: codes.Unauthenticated,
	}
)

// rpc is one method of the table: its call (which checks the answer
// when it succeeds) and its answer to each credential.
type rpc struct {
	method string
	call   func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error
	want   map[credential]codes.Code
}

// check returns an error when ok is false: a successful answer that is
// not what the call asked.
func check(ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf(format, args...)
	}
	return nil
}

// rpcTable is every RPC of KeysService, PolicyService and AuditService,
// each naming tenant acme, and of InferenceService.
var rpcTable = []rpc{
	{"/tollgate.inference.v1.InferenceService/ListModels", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := inferencev1.NewInferenceServiceClient(conn).ListModels(ctx, &inferencev1.ListModelsRequest{}, opts...)
		if err != nil {
			return err
		}
		return check(len(r.GetModels()) >= 2, "models %v", r)
	}, virtualKeyCaller},
	{"/tollgate.inference.v1.InferenceService/ChatCompletion", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		stream, err := inferencev1.NewInferenceServiceClient(conn).ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: "builtin/echo",
			Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "hi"}}}}, opts...)
		if err != nil {
			return err
		}
		var text string
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return check(text == "hi", "reply %q", text)
			}
			if err != nil {
				return err
			}
			text += ev.GetContent()
		}
	}, virtualKeyCaller},
	{"/tollgate.inference.v1.InferenceService/Embed", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := inferencev1.NewInferenceServiceClient(conn).Embed(ctx, &inferencev1.EmbedRequest{Model: "builtin/embed",
			Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "hi"}}}}, opts...)
		if err != nil {
			return err
		}
		return check(len(r.GetEmbeddings()) == 1, "embeddings %v", r)
	}, virtualKeyCaller},
	{"/tollgate.inference.v1.InferenceService/CountTokens", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := inferencev1.NewInferenceServiceClient(conn).CountTokens(ctx, &inferencev1.CountTokensRequest{Model: "builtin/echo",
			Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "one two"}}}}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetPromptTokens() > 0, "count %v", r)
	}, virtualKeyCaller},
	{"/tollgate.keys.v1.KeysService/CreateKey", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := keysv1.NewKeysServiceClient(conn).CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: "made-over-grpc", AllModels: true}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetKey().GetTenantId() == "acme" && len(r.GetSecret()) > 4 && r.GetSecret()[:4] == "tgk_", "created %v", r)
	}, operatorOnly},
	{"/tollgate.keys.v1.KeysService/GetKey", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := keysv1.NewKeysServiceClient(conn).GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "acme", KeyId: a.acmeKeyID}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetKey().GetKeyId() == a.acmeKeyID, "got %v", r)
	}, operatorOnly},
	{"/tollgate.keys.v1.KeysService/ListKeys", func(ctx context.Context, conn *grpc.ClientConn, _ *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := keysv1.NewKeysServiceClient(conn).ListKeys(ctx, &keysv1.ListKeysRequest{TenantId: "acme"}, opts...)
		if err != nil {
			return err
		}
		return check(len(r.GetKeys()) >= 4, "listed %d keys", len(r.GetKeys()))
	}, operatorOnly},
	{"/tollgate.keys.v1.KeysService/RevokeKey", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := keysv1.NewKeysServiceClient(conn).RevokeKey(ctx, &keysv1.RevokeKeyRequest{TenantId: "acme", KeyId: a.revokeKeyID}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetKey().GetRevokeTime() != nil, "revoked %v", r)
	}, operatorOnly},
	{"/tollgate.keys.v1.KeysService/AuthenticateKey", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := keysv1.NewKeysServiceClient(conn).AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: a.acmeKey}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetKey().GetKeyId() == a.acmeKeyID, "authenticated %v", r)
	}, operatorOnly},
	{"/tollgate.policy.v1.PolicyService/Decide", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := policyv1.NewPolicyServiceClient(conn).Decide(ctx, &policyv1.DecideRequest{
			Version: 1,
			Key:     &policyv1.Key{TenantId: "acme", KeyId: a.acmeKeyID, AllModels: true},
			Request: &policyv1.Request{Endpoint: policyv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Model: "builtin/echo", MessageCount: 1},
		}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetDecision().GetId() != "", "decided %v", r)
	}, operatorOnly},
	{"/tollgate.audit.v1.AuditService/GetEvent", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := auditv1.NewAuditServiceClient(conn).GetEvent(ctx, &auditv1.GetEventRequest{TenantId: "acme", RequestId: a.events[0]}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetEvent().GetRequestId() == a.events[0] && r.GetEvent().GetTenantId() == "acme", "event %v", r)
	}, tenantAuditor},
	{"/tollgate.audit.v1.AuditService/GetHead", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := auditv1.NewAuditServiceClient(conn).GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "acme", Day: a.day}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetHead().GetEventCount() == 2, "head %v", r)
	}, tenantAuditor},
	{"/tollgate.audit.v1.AuditService/ListHeads", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := auditv1.NewAuditServiceClient(conn).ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: a.day}, opts...)
		if err != nil {
			return err
		}
		return check(len(r.GetHeads()) == 2, "heads %v", r)
	}, tenantAuditor},
	{"/tollgate.audit.v1.AuditService/GetInclusionProof", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := auditv1.NewAuditServiceClient(conn).GetInclusionProof(ctx, &auditv1.GetInclusionProofRequest{TenantId: "acme", Day: a.day, RequestId: a.events[0]}, opts...)
		if err != nil {
			return err
		}
		return check(r.GetLeafIndex() == 0 && r.GetHead().GetEventCount() == 2 && len(r.GetHashes()) == 1, "proof %v", r)
	}, tenantAuditor},
	{"/tollgate.audit.v1.AuditService/GetConsistencyProof", func(ctx context.Context, conn *grpc.ClientConn, a *grpcAppliance, opts ...grpc.CallOption) error {
		r, err := auditv1.NewAuditServiceClient(conn).GetConsistencyProof(ctx, &auditv1.GetConsistencyProofRequest{TenantId: "acme", Day: a.day, FromSize: 1, ToSize: 2}, opts...)
		if err != nil {
			return err
		}
		return check(len(r.GetHashes()) == 1, "proof %v", r)
	}, tenantAuditor},
}

// TestGRPCAccess: every RPC of the table against every credential, over
// TLS to a real appliance. A refusal is UNAUTHENTICATED (unauthorized) or
// PERMISSION_DENIED (forbidden) with an ErrorInfo carrying the call's
// request id; the right credential gets the service's answer.
func TestGRPCAccess(t *testing.T) {
	a := startGRPCAppliance(t, nil)
	ops, alice := a.ca.Client(t, testpki.Names{CommonName: "ops"}), a.ca.Client(t, testpki.Names{CommonName: "alice"})
	anonymous := dialGRPC(t, a.addrs.GRPC, a.ca, nil)
	conns := map[credential]*grpc.ClientConn{operatorCert: dialGRPC(t, a.addrs.GRPC, a.ca, &ops), otherCert: dialGRPC(t, a.addrs.GRPC, a.ca, &alice)}
	bearers := map[credential]string{
		acmeAudit: acmeAuditToken, globexAudit: globexAuditToken, acmeVirtualKey: a.acmeKey,
		globexVirtualKey: a.globexKey, revokedKey: a.revokedKey, expiredKey: a.expiredKey,
	}

	covered := map[string]bool{}
	for _, r := range rpcTable {
		covered[r.method] = true
		for cred := range credentials_ {
			want, ok := r.want[cred]
			if !ok {
				t.Fatalf("%s: no answer given for %s", r.method, cred)
			}
			t.Run(fmt.Sprintf("%s/%s", r.method[1:], cred), func(t *testing.T) {
				conn, ctx := conns[cred], context.Background()
				if conn == nil {
					conn = anonymous
				}
				if b := bearers[cred]; b != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+b)
				}
				var header metadata.MD
				err := r.call(ctx, conn, a, grpc.Header(&header))
				st := status.Convert(err)
				if st.Code() != want || (want == codes.OK) != (err == nil) {
					t.Fatalf("%v, want %s", err, want)
				}
				if want == codes.OK {
					return
				}
				info, reason := grpcserver.ErrorInfo(st), map[codes.Code]string{codes.Unauthenticated: "unauthorized", codes.PermissionDenied: "forbidden"}[want]
				ids := header.Get(grpcserver.RequestIDHeader)
				if info == nil || info.GetReason() != reason || len(ids) != 1 ||
					info.GetMetadata()[grpcserver.MetadataRequestID] != ids[0] {
					t.Fatalf("refusal %v: ErrorInfo %v, x-request-id %v; want %s, reason %s and the request id", err, info, ids, want, reason)
				}
			})
		}
	}
	for _, desc := range []grpc.ServiceDesc{keysv1.KeysService_ServiceDesc, policyv1.PolicyService_ServiceDesc, auditv1.AuditService_ServiceDesc,
		inferencev1.InferenceService_ServiceDesc} {
		var names []string
		for _, m := range desc.Methods {
			names = append(names, m.MethodName)
		}
		for _, m := range desc.Streams {
			names = append(names, m.StreamName)
		}
		for _, name := range names {
			if method := "/" + desc.ServiceName + "/" + name; !covered[method] {
				t.Errorf("%s has no row in the table", method)
			}
		}
	}
}

// TestGRPCAccessChecksBeforeValidation: a request that is not even valid
// gets the refusal of its credential, not INVALID_ARGUMENT.
func TestGRPCAccessChecksBeforeValidation(t *testing.T) {
	a := startGRPCAppliance(t, nil)
	conn := dialGRPC(t, a.addrs.GRPC, a.ca, nil)
	bad := &keysv1.CreateKeyRequest{TenantId: "NOT A TENANT"}
	if _, err := keysv1.NewKeysServiceClient(conn).CreateKey(context.Background(), bad); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an invalid request without a credential: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+globexAuditToken)
	if _, err := auditv1.NewAuditServiceClient(conn).GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "acme", Day: "today"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an invalid request for another tenant: %v", err)
	}
}
