// Package access decides which caller may call which method of the
// appliance's gRPC listener: one table keyed by full method name (Rules),
// enforced by one interceptor (Guard) that runs before the request is
// validated and before any handler.
//
// A caller proves who it is with one of two credentials:
//
//   - an operator's client certificate: verified at the TLS handshake
//     against the listener's client CA, and naming an identity of the
//     operator allow list in its Subject CommonName or in one of its DNS,
//     email or URI SANs (exact match);
//   - a tenant's audit token, `authorization: Bearer tga_…`: the central
//     plane's tokens (central/auth), each bound to one tenant.
//
// Each rule reads one kind of credential and ignores the other.
package access

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/tollgate-dev/tollgate/internal/grpcserver"
)

// Rule is what a method asks of its caller.
type Rule uint8

const (
	// Deny refuses every caller. A method the table does not name has
	// it.
	Deny Rule = iota
	// Public asks for nothing: health and reflection.
	Public
	// SelfAuthenticated passes the call untouched: the service
	// authenticates its callers itself (the governed InferenceService,
	// with a virtual key).
	SelfAuthenticated
	// Operator asks for a verified client certificate naming an
	// operator. No credential is UNAUTHENTICATED; any other credential
	// (another certificate, a virtual key, an audit token) is
	// PERMISSION_DENIED.
	Operator
	// TenantAuditor asks for an audit token of the tenant the request
	// names (its tenant_id). No token, or one that is not an audit
	// token, is UNAUTHENTICATED; another tenant's is PERMISSION_DENIED,
	// whether or not the tenant named exists.
	TenantAuditor
)

func (r Rule) String() string {
	switch r {
	case Deny:
		return "deny"
	case Public:
		return "public"
	case SelfAuthenticated:
		return "self-authenticated"
	case Operator:
		return "operator"
	case TenantAuditor:
		return "tenant auditor"
	}
	return fmt.Sprintf("Rule(%d)", uint8(r))
}

// Rules maps full method names (/package.Service/Method) to their rule.
type Rules map[string]Rule

// Service gives every method of the service desc describes the rule, and
// returns r.
func (r Rules) Service(desc *grpc.ServiceDesc, rule Rule) Rules {
	for _, m := range desc.Methods {
		r["/"+desc.ServiceName+"/"+m.MethodName] = rule
	}
	for _, s := range desc.Streams {
		r["/"+desc.ServiceName+"/"+s.StreamName] = rule
	}
	return r
}

// Uncovered returns the methods of the services in info (a server's
// GetServiceInfo) that have no rule, sorted: each would be refused to
// everyone.
func (r Rules) Uncovered(info map[string]grpc.ServiceInfo) []string {
	var missing []string
	for name, svc := range info {
		for _, m := range svc.Methods {
			if _, ok := r["/"+name+"/"+m.Name]; !ok {
				missing = append(missing, "/"+name+"/"+m.Name)
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// AuditTokens resolves an audit token to its tenant (central/auth.Tokens).
type AuditTokens interface {
	Tenant(token string) (tenant string, ok bool)
}

// Config is what a Guard enforces.
type Config struct {
	Rules Rules
	// Operators are the identities a verified client certificate must
	// name to be an operator's.
	Operators []string
	// AuditTokens are the tenants' audit tokens; nil: none.
	AuditTokens AuditTokens
	// Logger records refusals and operator calls; nil discards them.
	Logger *slog.Logger
}

// Guard enforces a Config on every call (grpcserver.NewGuarded).
type Guard struct {
	rules     Rules
	operators map[string]bool
	tokens    AuditTokens
	log       *slog.Logger
}

// New returns the guard of cfg.
func New(cfg Config) *Guard {
	g := &Guard{rules: cfg.Rules, operators: map[string]bool{}, tokens: cfg.AuditTokens, log: cfg.Logger}
	for _, op := range cfg.Operators {
		g.operators[op] = true
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g
}

// Unary checks a unary call before its handler runs.
func (g *Guard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	rule := g.rules[info.FullMethod]
	tenant, err := g.authorize(ctx, info.FullMethod, rule)
	if err == nil && rule == TenantAuditor {
		err = g.permitTenant(ctx, info.FullMethod, tenant, req)
	}
	if err != nil {
		return nil, err
	}
	return next(ctx, req)
}

// Stream checks a streaming call before its handler runs and, for a
// TenantAuditor method, every message it receives.
func (g *Guard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	rule := g.rules[info.FullMethod]
	tenant, err := g.authorize(ss.Context(), info.FullMethod, rule)
	if err != nil {
		return err
	}
	if rule == TenantAuditor {
		ss = &tenantStream{ServerStream: ss, g: g, method: info.FullMethod, tenant: tenant}
	}
	return next(srv, ss)
}

// tenantStream refuses a received message naming another tenant than the
// caller's.
type tenantStream struct {
	grpc.ServerStream
	g      *Guard
	method string
	tenant string
}

func (s *tenantStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.g.permitTenant(s.Context(), s.method, s.tenant, m)
}

// authorize checks the caller's credential against rule; for a
// TenantAuditor method it returns the tenant of the caller's token.
func (g *Guard) authorize(ctx context.Context, method string, rule Rule) (string, error) {
	switch rule {
	case Public, SelfAuthenticated:
		return "", nil
	case Operator:
		return "", g.operator(ctx, method)
	case TenantAuditor:
		return g.auditor(ctx, method)
	}
	g.log.ErrorContext(ctx, "gRPC method without an access rule refused", slog.String("method", method),
		slog.String("request_id", grpcserver.RequestID(ctx)))
	return "", grpcserver.Error(ctx, codes.PermissionDenied, grpcserver.ReasonForbidden,
		"method "+method+" is not open to any caller", nil)
}

// operator lets through a caller whose verified client certificate names
// an operator.
func (g *Guard) operator(ctx context.Context, method string) error {
	service := serviceOf(method)
	cert := verifiedCert(ctx)
	if cert != nil {
		ids := Identities(cert)
		for _, id := range ids {
			if g.operators[id] {
				g.log.InfoContext(ctx, "operator call", slog.String("method", method), slog.String("operator", id),
					slog.String("request_id", grpcserver.RequestID(ctx)), slog.String("peer", peerAddr(ctx)))
				return nil
			}
		}
		return g.refuse(ctx, method, codes.PermissionDenied, grpcserver.ReasonForbidden,
			fmt.Sprintf("%s answers operators only: the client certificate of %q is not an operator's", service, strings.Join(ids, ", ")),
			slog.Any("certificate", ids))
	}
	if len(metadata.ValueFromIncomingContext(ctx, "authorization")) > 0 {
		return g.refuse(ctx, method, codes.PermissionDenied, grpcserver.ReasonForbidden,
			service+" answers operators only, identified by their client certificate; virtual keys and audit tokens do not give access to it")
	}
	return g.refuse(ctx, method, codes.Unauthenticated, grpcserver.ReasonUnauthorized,
		service+" answers operators only: connect with an operator's client certificate")
}

// auditor returns the tenant of the caller's audit token.
func (g *Guard) auditor(ctx context.Context, method string) (string, error) {
	token, problem := bearer(metadata.ValueFromIncomingContext(ctx, "authorization"))
	if problem == "" {
		if g.tokens != nil {
			if tenant, ok := g.tokens.Tenant(token); ok {
				return tenant, nil
			}
		}
		problem = "unknown audit token"
	}
	return "", g.refuse(ctx, method, codes.Unauthenticated, grpcserver.ReasonUnauthorized, problem)
}

// permitTenant refuses a request naming a tenant other than tenant, the
// caller's.
func (g *Guard) permitTenant(ctx context.Context, method, tenant string, req any) error {
	r, ok := req.(interface{ GetTenantId() string })
	if !ok {
		g.log.ErrorContext(ctx, "gRPC method for a tenant's auditor has no tenant_id; refused", slog.String("method", method),
			slog.String("request_id", grpcserver.RequestID(ctx)))
		return grpcserver.Error(ctx, codes.PermissionDenied, grpcserver.ReasonForbidden, "the request names no tenant", nil)
	}
	if r.GetTenantId() != tenant {
		return g.refuse(ctx, method, codes.PermissionDenied, grpcserver.ReasonForbidden,
			"the audit token does not give access to tenant "+r.GetTenantId(), slog.String("tenant", tenant))
	}
	return nil
}

// refuse logs a refusal and returns its status, with an ErrorInfo of
// reason and the call's request id.
func (g *Guard) refuse(ctx context.Context, method string, code codes.Code, reason, msg string, attrs ...slog.Attr) error {
	all := append([]slog.Attr{
		slog.String("method", method), slog.String("code", code.String()),
		slog.String("request_id", grpcserver.RequestID(ctx)), slog.String("peer", peerAddr(ctx)),
	}, attrs...)
	g.log.LogAttrs(ctx, slog.LevelInfo, "gRPC call refused", all...)
	return grpcserver.Error(ctx, code, reason, msg, nil)
}

// bearer returns the token of the one authorization value, or why there
// is none. More than one value is refused whatever they hold, as the
// central plane does: credentials that say two things are ambiguous.
func bearer(vals []string) (token, problem string) {
	switch {
	case len(vals) > 1:
		return "", "ambiguous credentials: more than one authorization value; send exactly one, authorization: Bearer <audit token>"
	case len(vals) == 1:
		if scheme, tok, ok := strings.Cut(vals[0], " "); ok && strings.EqualFold(scheme, "bearer") {
			if tok = strings.TrimSpace(tok); tok != "" {
				return tok, ""
			}
		}
	}
	return "", "missing audit token: send authorization: Bearer <audit token>"
}

// verifiedCert is the caller's client certificate when the TLS handshake
// verified it against the client CA, or nil.
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// Identities are the names a certificate may be an operator's by: its
// Subject CommonName, then its DNS, email and URI SANs.
func Identities(c *x509.Certificate) []string {
	var ids []string
	if c.Subject.CommonName != "" {
		ids = append(ids, c.Subject.CommonName)
	}
	ids = append(ids, c.DNSNames...)
	ids = append(ids, c.EmailAddresses...)
	for _, u := range c.URIs {
		ids = append(ids, u.String())
	}
	return ids
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// serviceOf is the service of a full method name, without its package:
// KeysService of /tollgate.keys.v1.KeysService/CreateKey.
func serviceOf(method string) string {
	svc, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if i := strings.LastIndexByte(svc, '.'); i >= 0 {
		svc = svc[i+1:]
	}
	return svc
}
