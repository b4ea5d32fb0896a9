package grpcserver

import (
	"context"

	"google.golang.org/grpc"
)

// Stop stops s gracefully (no new calls, those running may finish), or at
// once, cutting the calls still running, when ctx ends first. It reports
// whether every call finished.
func Stop(ctx context.Context, s *grpc.Server) bool {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		s.Stop()
		<-done
		return false
	}
}
