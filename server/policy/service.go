package policy

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
)

// Service implements policyv1.PolicyServiceServer over an Engine. Requests
// are validated by the grpcserver interceptor before they arrive here.
type Service struct {
	policyv1.UnimplementedPolicyServiceServer
	engine *Engine
}

// NewService serves decisions made by e.
func NewService(e *Engine) *Service {
	return &Service{engine: e}
}

// Decide evaluates one decision; Internal when the bundle fails to
// evaluate (the engine has logged why).
func (s *Service) Decide(ctx context.Context, req *policyv1.DecideRequest) (*policyv1.DecideResponse, error) {
	d, err := s.engine.Decide(ctx, InputFromProto(req))
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Error(codes.Internal, "policy evaluation failed")
	}
	return &policyv1.DecideResponse{Decision: DecisionToProto(&d)}, nil
}
