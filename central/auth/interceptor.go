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
// and puts the token's tenant in the context (TenantFrom). A missing or
// unknown token is Unauthenticated, and a request naming another tenant
// (its tenant_id, from the path) PermissionDenied, whatever else the
// request holds: install it outermost (grpc.UnaryInterceptor), before
// validation, so that the answer to another tenant's path depends only on
// the token and the path.
func (t *Tokens) UnaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	token, ok := bearer(ctx)
	if !ok {
		return nil, apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "missing audit token: send Authorization: Bearer <token>")
	}
	tenant, ok := t.Tenant(token)
	if !ok {
		return nil, apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "unknown audit token")
	}
	ctx = context.WithValue(ctx, tenantKey{}, tenant)
	if r, ok := req.(interface{ GetTenantId() string }); ok {
		if err := Authorize(ctx, r.GetTenantId()); err != nil {
			return nil, err
		}
	}
	return next(ctx, req)
}

// Authorize checks that the caller's token belongs to tenantID; a token of
// another tenant is PermissionDenied (HTTP 403, code forbidden), whether or
// not tenantID exists.
func Authorize(ctx context.Context, tenantID string) error {
	tenant, ok := ctx.Value(tenantKey{}).(string)
	if !ok {
		return apierr.New(codes.Unauthenticated, apierr.ReasonUnauthorized, "missing audit token")
	}
	if tenant != tenantID {
		return apierr.New(codes.PermissionDenied, apierr.ReasonForbidden, "the audit token does not give access to tenant "+tenantID)
	}
	return nil
}

func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token, true
			}
		}
	}
	return "", false
}
