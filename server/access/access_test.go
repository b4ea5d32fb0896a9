package access_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/testpki"
	"github.com/tollgate-dev/tollgate/server/access"
)

// tokens is a fixed set of audit tokens.
type tokens map[string]string

func (t tokens) Tenant(token string) (string, bool) { tenant, ok := t[token]; return tenant, ok }

const (
	acmeToken   = "tga_acme_audit_token"
	globexToken = "tga_globex_audit_token"
	virtualKey  = "tgk_some_virtual_key"
)

// streamDesc is a client-streaming method whose messages name a tenant,
// to check that a TenantAuditor stream is checked message by message.
var streamDesc = grpc.ServiceDesc{
	ServiceName: "test.Heads",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Upload",
		ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				if err := ss.RecvMsg(new(auditv1.GetHeadRequest)); errors.Is(err, io.EOF) {
					return ss.SendMsg(&emptypb.Empty{})
				} else if err != nil {
					return err
				}
			}
		},
	}},
}

// server serves the appliance's services (their generated Unimplemented
// handlers: a call the guard lets through is UNIMPLEMENTED), health and
// reflection behind a Guard over TLS that verifies client certificates
// of ca. It returns the listener's address and the guard's log.
func server(t *testing.T, ca *testpki.CA, rules access.Rules) (string, *lockedbuf.Buffer) {
	t.Helper()
	var logs lockedbuf.Buffer
	guard := access.New(access.Config{
		Rules:       rules,
		Operators:   []string{"ops", "ops.example.com", "ops@example.com", "spiffe://example.com/ops"},
		AuditTokens: tokens{acmeToken: "acme", globexToken: "globex"},
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	srv := grpcserver.NewGuarded(slog.New(slog.DiscardHandler), guard, grpc.Creds(credentials.NewTLS(tlsCfg)))
	keysv1.RegisterKeysServiceServer(srv, keysv1.UnimplementedKeysServiceServer{})
	policyv1.RegisterPolicyServiceServer(srv, policyv1.UnimplementedPolicyServiceServer{})
	auditv1.RegisterAuditServiceServer(srv, auditv1.UnimplementedAuditServiceServer{})
	inferencev1.RegisterInferenceServiceServer(srv, inferencev1.UnimplementedInferenceServiceServer{})
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	srv.RegisterService(&streamDesc, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), &logs
}

// dial connects over TLS trusting ca, with client certificate cert when
// set.
func dial(t *testing.T, addr string, ca *testpki.CA, cert *tls.Certificate) *grpc.ClientConn {
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

// call is one valid request of a method of each rule.
type call struct {
	method   string
	req, out proto.Message
}

var (
	keysCall      = call{"/tollgate.keys.v1.KeysService/ListKeys", &keysv1.ListKeysRequest{TenantId: "acme"}, new(keysv1.ListKeysResponse)}
	authKeyCall   = call{"/tollgate.keys.v1.KeysService/AuthenticateKey", &keysv1.AuthenticateKeyRequest{Secret: virtualKey}, new(keysv1.AuthenticateKeyResponse)}
	policyCall    = call{"/tollgate.policy.v1.PolicyService/Decide", validDecide(), new(policyv1.DecideResponse)}
	acmeAudit     = call{"/tollgate.audit.v1.AuditService/GetHead", &auditv1.GetHeadRequest{TenantId: "acme", Day: "2026-03-01"}, new(auditv1.GetHeadResponse)}
	nobodyAudit   = call{"/tollgate.audit.v1.AuditService/GetHead", &auditv1.GetHeadRequest{TenantId: "nobody", Day: "2026-03-01"}, new(auditv1.GetHeadResponse)}
	invalidAudit  = call{"/tollgate.audit.v1.AuditService/GetHead", &auditv1.GetHeadRequest{TenantId: "acme", Day: "yesterday"}, new(auditv1.GetHeadResponse)}
	inferenceCall = call{"/tollgate.inference.v1.InferenceService/ListModels", &inferencev1.ListModelsRequest{}, new(inferencev1.ListModelsResponse)}
	healthCall    = call{"/grpc.health.v1.Health/Check", &grpc_health_v1.HealthCheckRequest{}, new(grpc_health_v1.HealthCheckResponse)}
)

func validDecide() *policyv1.DecideRequest {
	return &policyv1.DecideRequest{
		Version: 1,
		Key:     &policyv1.Key{TenantId: "acme", KeyId: "key_a", AllModels: true},
		Request: &policyv1.Request{Endpoint: policyv1.Endpoint_ENDPOINT_MODELS},
	}
}

// TestGuard: each rule against each credential, over TLS. A call the
// guard lets through reaches its (unimplemented) handler; a refusal is
// UNAUTHENTICATED or PERMISSION_DENIED with an ErrorInfo carrying the
// call's request id.
func TestGuard(t *testing.T) {
	ca := testpki.NewCA(t, "test client CA")
	addr, logs := server(t, ca, access.ApplianceRules().Service(&streamDesc, access.TenantAuditor))
	cert := func(n testpki.Names) *tls.Certificate { c := ca.Client(t, n); return &c }
	byCN, byDNS := cert(testpki.Names{CommonName: "ops"}), cert(testpki.Names{CommonName: "robot", DNS: []string{"ops.example.com"}})
	byEmail := cert(testpki.Names{Emails: []string{"ops@example.com"}})
	byURI := cert(testpki.Names{CommonName: "tool", URIs: []string{"spiffe://example.com/ops"}})
	alice := cert(testpki.Names{CommonName: "alice", DNS: []string{"alice.example.com"}})
	// Names that are an operator's only in part, or in another case, are
	// not an operator's.
	near := cert(testpki.Names{CommonName: "OPS", DNS: []string{"ops.example.com.evil"}, URIs: []string{"spiffe://example.com/ops/x"}})

	const passed = codes.Unimplemented // the handler was reached
	for _, c := range []struct {
		name   string
		cert   *tls.Certificate
		auth   []string // authorization values
		call   call
		want   codes.Code
		reason string
	}{
		{"keys, no credential", nil, nil, keysCall, codes.Unauthenticated, "unauthorized"},
		{"keys, operator by CN", byCN, nil, keysCall, passed, ""},
		{"keys, operator by DNS SAN", byDNS, nil, keysCall, passed, ""},
		{"keys, operator by email SAN", byEmail, nil, keysCall, passed, ""},
		{"keys, operator by URI SAN", byURI, nil, keysCall, passed, ""},
		{"keys, operator with a bearer too", byCN, []string{"Bearer " + virtualKey}, keysCall, passed, ""},
		{"keys, certificate not an operator's", alice, nil, keysCall, codes.PermissionDenied, "forbidden"},
		{"keys, names near an operator's", near, nil, keysCall, codes.PermissionDenied, "forbidden"},
		{"keys, virtual key", nil, []string{"Bearer " + virtualKey}, keysCall, codes.PermissionDenied, "forbidden"},
		{"keys, audit token", nil, []string{"Bearer " + acmeToken}, keysCall, codes.PermissionDenied, "forbidden"},
		{"keys, anything in authorization", nil, []string{"Basic b3BzOm9wcw=="}, keysCall, codes.PermissionDenied, "forbidden"},
		{"authenticate key, no credential", nil, nil, authKeyCall, codes.Unauthenticated, "unauthorized"},
		{"authenticate key, the key itself", nil, []string{"Bearer " + virtualKey}, authKeyCall, codes.PermissionDenied, "forbidden"},
		{"authenticate key, operator", byURI, nil, authKeyCall, passed, ""},
		{"policy, no credential", nil, nil, policyCall, codes.Unauthenticated, "unauthorized"},
		{"policy, virtual key", nil, []string{"Bearer " + virtualKey}, policyCall, codes.PermissionDenied, "forbidden"},
		{"policy, certificate not an operator's", alice, nil, policyCall, codes.PermissionDenied, "forbidden"},
		{"policy, operator", byCN, nil, policyCall, passed, ""},
		{"audit, no credential", nil, nil, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, the tenant's token", nil, []string{"Bearer " + acmeToken}, acmeAudit, passed, ""},
		{"audit, scheme in another case", nil, []string{"bearer " + acmeToken}, acmeAudit, passed, ""},
		{"audit, another tenant's token", nil, []string{"Bearer " + globexToken}, acmeAudit, codes.PermissionDenied, "forbidden"},
		{"audit, a tenant that does not exist", nil, []string{"Bearer " + acmeToken}, nobodyAudit, codes.PermissionDenied, "forbidden"},
		{"audit, unknown token", nil, []string{"Bearer tga_unknown_token"}, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, virtual key", nil, []string{"Bearer " + virtualKey}, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, token without its scheme", nil, []string{acmeToken}, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, two values", nil, []string{"Bearer " + acmeToken, "Bearer " + acmeToken}, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, operator certificate alone", byCN, nil, acmeAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, operator with another tenant's token", byCN, []string{"Bearer " + globexToken}, acmeAudit, codes.PermissionDenied, "forbidden"},
		// Access is decided before the request is validated.
		{"audit, invalid request, no credential", nil, nil, invalidAudit, codes.Unauthenticated, "unauthorized"},
		{"audit, invalid request, the tenant's token", nil, []string{"Bearer " + acmeToken}, invalidAudit, codes.InvalidArgument, "invalid_request"},
		{"inference, no credential", nil, nil, inferenceCall, passed, ""},
		{"inference, virtual key", nil, []string{"Bearer " + virtualKey}, inferenceCall, passed, ""},
		{"health, no credential", nil, nil, healthCall, codes.OK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, addr, ca, c.cert)
			ctx := context.Background()
			for _, v := range c.auth {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
			}
			var header metadata.MD
			err := conn.Invoke(ctx, c.call.method, c.call.req, c.call.out, grpc.Header(&header))
			st := status.Convert(err)
			if st.Code() != c.want {
				t.Fatalf("%s: %v, want %s", c.call.method, err, c.want)
			}
			if c.reason == "" {
				return
			}
			info := grpcserver.ErrorInfo(st)
			ids := header.Get(grpcserver.RequestIDHeader)
			if info == nil || info.GetReason() != c.reason || len(ids) != 1 || info.GetMetadata()[grpcserver.MetadataRequestID] != ids[0] {
				t.Fatalf("%s: ErrorInfo %v, x-request-id %v; want reason %s and the request id", c.call.method, info, ids, c.reason)
			}
		})
	}
	// Operator calls are logged with the operator's name, refusals with
	// their code; no secret is logged.
	for _, want := range []string{`msg="operator call" method=/tollgate.keys.v1.KeysService/ListKeys operator=spiffe://example.com/ops`,
		`msg="gRPC call refused" method=/tollgate.keys.v1.KeysService/ListKeys code=PermissionDenied`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	for _, secret := range []string{acmeToken, globexToken, virtualKey} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log holds the secret %s", secret)
		}
	}
}

// TestGuardStream: a TenantAuditor stream is refused without a token, and
// cut at its first message naming another tenant.
func TestGuardStream(t *testing.T) {
	ca := testpki.NewCA(t, "test client CA")
	addr, _ := server(t, ca, access.ApplianceRules().Service(&streamDesc, access.TenantAuditor))
	conn := dial(t, addr, ca, nil)
	upload := func(auth string, tenants ...string) error {
		ctx := context.Background()
		if auth != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+auth)
		}
		s, err := conn.NewStream(ctx, &streamDesc.Streams[0], "/test.Heads/Upload")
		if err != nil {
			return err
		}
		for _, tenant := range tenants {
			if err := s.SendMsg(&auditv1.GetHeadRequest{TenantId: tenant, Day: "2026-03-01"}); err != nil {
				break // the status follows from RecvMsg
			}
		}
		_ = s.CloseSend()
		return s.RecvMsg(new(emptypb.Empty))
	}
	for _, c := range []struct {
		name    string
		auth    string
		tenants []string
		want    codes.Code
	}{
		{"no token", "", []string{"acme"}, codes.Unauthenticated},
		{"the tenant's token", acmeToken, []string{"acme", "acme"}, codes.OK},
		{"another tenant in the second message", acmeToken, []string{"acme", "globex"}, codes.PermissionDenied},
	} {
		if got := status.Code(upload(c.auth, c.tenants...)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestUnruledMethodRefused: a method without a rule is refused to
// everyone, operators included.
func TestUnruledMethodRefused(t *testing.T) {
	ca := testpki.NewCA(t, "test client CA")
	rules := access.ApplianceRules()
	delete(rules, keysCall.method)
	addr, logs := server(t, ca, rules)
	op := ca.Client(t, testpki.Names{CommonName: "ops"})
	err := dial(t, addr, ca, &op).Invoke(context.Background(), keysCall.method, keysCall.req, keysCall.out)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a method without a rule: %v", err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("not logged as an error:\n%s", logs.String())
	}
}

// TestApplianceRulesCoverEveryMethod: every method of the services the
// appliance serves has a rule, and Uncovered names those that do not.
func TestApplianceRulesCoverEveryMethod(t *testing.T) {
	srv := grpc.NewServer()
	keysv1.RegisterKeysServiceServer(srv, keysv1.UnimplementedKeysServiceServer{})
	policyv1.RegisterPolicyServiceServer(srv, policyv1.UnimplementedPolicyServiceServer{})
	auditv1.RegisterAuditServiceServer(srv, auditv1.UnimplementedAuditServiceServer{})
	inferencev1.RegisterInferenceServiceServer(srv, inferencev1.UnimplementedInferenceServiceServer{})
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	rules := access.ApplianceRules()
	if missing := rules.Uncovered(srv.GetServiceInfo()); len(missing) > 0 {
		t.Fatalf("methods without a rule: %v", missing)
	}
	for method, want := range map[string]access.Rule{
		"/tollgate.keys.v1.KeysService/CreateKey":                        access.Operator,
		"/tollgate.keys.v1.KeysService/AuthenticateKey":                  access.Operator,
		"/tollgate.policy.v1.PolicyService/Decide":                       access.Operator,
		"/tollgate.audit.v1.AuditService/GetEvent":                       access.TenantAuditor,
		"/tollgate.audit.v1.AuditService/GetConsistencyProof":            access.TenantAuditor,
		"/tollgate.inference.v1.InferenceService/ChatCompletion":         access.SelfAuthenticated,
		"/grpc.health.v1.Health/Watch":                                   access.Public,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      access.Public,
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": access.Public,
	} {
		if rules[method] != want {
			t.Errorf("%s: %s, want %s", method, rules[method], want)
		}
	}
	delete(rules, "/tollgate.keys.v1.KeysService/GetKey")
	delete(rules, "/grpc.health.v1.Health/Check")
	if got := rules.Uncovered(srv.GetServiceInfo()); !slices.Equal(got, []string{"/grpc.health.v1.Health/Check", "/tollgate.keys.v1.KeysService/GetKey"}) {
		t.Errorf("Uncovered: %v", got)
	}
}

// TestIdentities: a certificate's common name, then its DNS, email and
// URI SANs.
func TestIdentities(t *testing.T) {
	ca := testpki.NewCA(t, "test client CA")
	c := ca.Client(t, testpki.Names{CommonName: "ops", DNS: []string{"a.example"}, Emails: []string{"o@example.com"}, URIs: []string{"spiffe://example.com/x"}})
	if got := access.Identities(c.Leaf); !slices.Equal(got, []string{"ops", "a.example", "o@example.com", "spiffe://example.com/x"}) {
		t.Errorf("Identities: %v", got)
	}
}

// TestForeignCertificateRefused: a client certificate that does not chain
// to the client CA ends the handshake; no call gets through, even a
// public one.
func TestForeignCertificateRefused(t *testing.T) {
	ca := testpki.NewCA(t, "test client CA")
	addr, _ := server(t, ca, access.ApplianceRules())
	foreign := testpki.NewCA(t, "another CA").Client(t, testpki.Names{CommonName: "ops"})
	// Sent whatever CAs the server names (a client would otherwise send
	// none, and be anonymous).
	cfg := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Invoke(context.Background(), healthCall.method, healthCall.req, healthCall.out)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a certificate of another CA: %v, want the connection refused (UNAVAILABLE)", err)
	}
}
