package keys

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
)

// unauthenticatedMsg is the one message of every Unauthenticated answer, so
// that unknown, expired and revoked keys look alike to the caller.
const unauthenticatedMsg = "missing, unknown, expired or revoked key"

// Service implements keysv1.KeysServiceServer over a Store, and over a Cache
// for AuthenticateKey. Requests are validated by the protovalidate
// interceptor of grpcserver before they arrive here.
type Service struct {
	keysv1.UnimplementedKeysServiceServer
	store *Store
	cache *Cache
	log   *slog.Logger
}

// NewService returns the KeysService of store and cache; logger records the
// detail of internal errors, which clients do not see.
func NewService(store *Store, cache *Cache, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{store: store, cache: cache, log: logger}
}

// CreateKey mints a key and returns its secret once.
func (s *Service) CreateKey(ctx context.Context, req *keysv1.CreateKeyRequest) (*keysv1.CreateKeyResponse, error) {
	spec := Spec{
		TenantID:        req.GetTenantId(),
		Label:           req.GetLabel(),
		AllModels:       req.GetAllModels(),
		Models:          req.GetModels(),
		RPM:             req.GetRpm(),
		TPD:             req.GetTpd(),
		Scopes:          req.GetScopes(),
		MaxOutputTokens: req.GetMaxOutputTokens(),
	}
	if req.ExpireTime != nil {
		if err := req.GetExpireTime().CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "expire_time: %v", err)
		}
		spec.ExpireTime = req.GetExpireTime().AsTime()
		if spec.ExpireTime.Before(time.Unix(0, 0)) {
			// Its earliest value is Go's zero time, which a key reads as
			// "never expires": refused rather than taken the wrong way.
			return nil, status.Errorf(codes.InvalidArgument, "expire_time %s is before 1970-01-01T00:00:00Z", spec.ExpireTime.Format(time.RFC3339))
		}
	}
	k, secret, err := s.store.Create(ctx, spec)
	if err != nil {
		return nil, s.statusOf(ctx, "CreateKey", err)
	}
	return &keysv1.CreateKeyResponse{Key: k, Secret: secret}, nil
}

// GetKey returns one key.
func (s *Service) GetKey(ctx context.Context, req *keysv1.GetKeyRequest) (*keysv1.GetKeyResponse, error) {
	k, err := s.store.Get(ctx, req.GetTenantId(), req.GetKeyId())
	if err != nil {
		return nil, s.statusOf(ctx, "GetKey", err)
	}
	return &keysv1.GetKeyResponse{Key: k}, nil
}

// ListKeys returns a page of a tenant's keys ordered by key id.
func (s *Service) ListKeys(ctx context.Context, req *keysv1.ListKeysRequest) (*keysv1.ListKeysResponse, error) {
	ks, next, err := s.store.List(ctx, req.GetTenantId(), int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.statusOf(ctx, "ListKeys", err)
	}
	return &keysv1.ListKeysResponse{Keys: ks, NextPageToken: next}, nil
}

// RevokeKey revokes a key; revoking it again is not an error.
func (s *Service) RevokeKey(ctx context.Context, req *keysv1.RevokeKeyRequest) (*keysv1.RevokeKeyResponse, error) {
	k, err := s.store.Revoke(ctx, req.GetTenantId(), req.GetKeyId())
	if err != nil {
		return nil, s.statusOf(ctx, "RevokeKey", err)
	}
	return &keysv1.RevokeKeyResponse{Key: k}, nil
}

// AuthenticateKey resolves a secret to its key from the cache.
func (s *Service) AuthenticateKey(ctx context.Context, req *keysv1.AuthenticateKeyRequest) (*keysv1.AuthenticateKeyResponse, error) {
	e := s.cache.lookup(req.GetSecret())
	if e == nil {
		return nil, s.statusOf(ctx, "AuthenticateKey", ErrUnauthorized)
	}
	return &keysv1.AuthenticateKeyResponse{Key: e.record.proto()}, nil
}

// statusOf maps an error of this package to a gRPC status. Not found,
// already exists and invalid arguments say what was wrong with the request;
// anything else is logged and answered with a bare Internal.
func (s *Service) statusOf(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(err, ErrUnauthorized):
		return status.Error(codes.Unauthenticated, unauthenticatedMsg)
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	s.log.ErrorContext(ctx, "keys service failed", slog.String("method", method), slog.Any("err", err))
	return status.Error(codes.Internal, "internal error")
}

var _ keysv1.KeysServiceServer = (*Service)(nil)
