package auth

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/central/apierr"
)

type tenantKey struct{}

// UnaryInterceptor authenticates every call with its bearer audit token
// and puts the token's tenant in the context (Authorize reads it). A missing or
// unknown token, or more than one authorization value, is Unauthenticated, and a request naming another tenant
// (its tenant_id, from the path) PermissionDenied, whatever else the
// request holds: install it outermost (grpc.UnaryInterceptor), before
// validation, so that the answer to another tenant's path depends only on
// the token and the path.
func (t *Tokens) UnaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	tenant, err := t.Authenticate(md.Get("authorization"))
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, tenantKey{}, tenant)
	if r, ok := req.(interface{ GetTenantId() string }); ok {
		if err := Permit(tenant, r.GetTenantId()); err != nil {
			return nil, err
		}
	}
	return next(ctx, req)
}

// Authenticate returns the tenant of the token in authorization, the
// values of a call's authorization metadata or of a request's
// Authorization header. A missing or unknown token, or more than one
// value, is Unauthenticated (HTTP 401, code unauthorized). The REST API
// calls it before grpc-gateway reads the request, so that both APIs
// answer the same credentials with the same error.
func (t *Tokens) Authenticate(authorization []string) (string, error) {
	token, err := bearer(authorization)
	if err != nil {
		return "", err
	}
	tenant, ok := t.Tenant(token)
	if !ok {
		return "", apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "unknown audit token")
	}
	return tenant, nil
}

// Permit checks that tenant, a token's, is tenantID; another is
// PermissionDenied (HTTP 403, code forbidden), whether or not tenantID
// exists.
func Permit(tenant, tenantID string) error {
	if tenant != tenantID {
		return apierr.New(codes.PermissionDenied, apierr.ReasonForbidden, "the audit token does not give access to tenant "+tenantID)
	}
	return nil
}

// Authorize checks that the caller's token belongs to tenantID (see
// Permit).
func Authorize(ctx context.Context, tenantID string) error {
	tenant, ok := ctx.Value(tenantKey{}).(string)
	if !ok {
		return apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "missing audit token")
	}
	return Permit(tenant, tenantID)
}

// bearer returns the token of the one authorization value. More than one
// value is refused, whatever they hold: credentials that say two things
// (a REST request with two Authorization headers, a gRPC client adding a
// value to its credentials') are ambiguous, and using one of them would
// make the answer depend on which.
func bearer(vals []string) (string, error) {
	switch {
	case len(vals) > 1:
		return "", apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized,
			"ambiguous credentials: more than one Authorization header; send exactly one, Authorization: Bearer <token>")
	case len(vals) == 1:
		if scheme, token, ok := strings.Cut(vals[0], " "); ok && strings.EqualFold(scheme, "bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token, nil
			}
		}
	}
	return "", apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "missing audit token: send Authorization: Bearer <token>")
}
