package grpcserver

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// Grace resolves a configured shutdown grace the way every server of the
// module reads it: 0 means def (the caller's default), a negative value
// none.
func Grace(configured, def time.Duration) time.Duration {
	switch {
	case configured == 0:
		return def
	case configured < 0:
		return 0
	}
	return configured
}

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
