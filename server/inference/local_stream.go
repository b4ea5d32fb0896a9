package inference

import (
	"context"

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
