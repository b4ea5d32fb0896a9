package inference

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// inProcessStream is what both ends of an in-process call's stream
// (LocalClient's) do alike: no headers or trailers travel, and the
// context is the call's. Each stream type adds its own Recv, Send,
// SendMsg and RecvMsg.
type inProcessStream struct {
	ctx context.Context
}

func (s *inProcessStream) Header() (metadata.MD, error) { return nil, nil }
func (s *inProcessStream) Trailer() metadata.MD         { return nil }
func (s *inProcessStream) CloseSend() error             { return nil }
func (s *inProcessStream) Context() context.Context     { return s.ctx }
func (s *inProcessStream) SetHeader(metadata.MD) error  { return nil }
func (s *inProcessStream) SendHeader(metadata.MD) error { return nil }
func (s *inProcessStream) SetTrailer(metadata.MD)       {}

// hasOption reports whether opts hold a call option of type T: one of
// LocalClient's own (Validated, Whole), which a gRPC client ignores.
func hasOption[T grpc.CallOption](opts []grpc.CallOption) bool {
	for _, o := range opts {
		if _, ok := o.(T); ok {
			return true
		}
	}
	return false
}
