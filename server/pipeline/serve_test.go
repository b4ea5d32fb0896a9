package pipeline_test

import (
	"testing"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// serveService serves p's InferenceService (NewService, at most
// maxInFlight calls at once) over a gRPC connection of the test's own,
// the server built with opts, and returns a client of it.
func serveService(t *testing.T, p *pipeline.Pipeline, maxInFlight int, opts ...grpc.ServerOption) inferencev1.InferenceServiceClient {
	t.Helper()
	svc := pipeline.NewService(p, maxInFlight)
	return inferencev1.NewInferenceServiceClient(grpctest.Serve(t, func(r grpc.ServiceRegistrar) {
		inferencev1.RegisterInferenceServiceServer(r, svc)
	}, opts...))
}
