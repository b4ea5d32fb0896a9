package inference

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// wholeOption is Whole's call option.
type wholeOption struct{ grpc.EmptyCallOption }

// Whole says that the caller reads the reply to its end before it sends
// anything of it (a plain, not streamed, reply). LocalClient then runs the
// engine to its end within the call, its events kept in order until read,
// instead of pulling it event by event on a coroutine of its own
// (chatPull): a plain request spares the coroutine and a switch to and
// from it per event. The engine is still ended by the call's context. A
// gRPC client ignores it.
func Whole() grpc.CallOption { return wholeOption{} }

// chatWhole runs the engine's reply to its end on the caller's goroutine
// (Whole), a panic becoming codes.Internal as in a stream's.
func (c *LocalClient) chatWhole(ctx context.Context, in *inferencev1.ChatCompletionRequest) *wholeStream {
	s := &wholeStream{inProcessStream: inProcessStream{ctx: ctx}}
	s.events = s.first[:0]
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.err = status.Errorf(codes.Internal, "engine panicked: %v", p)
			}
		}()
		if err := c.svc.ChatCompletion(in, (*wholeServerSide)(s)); err != nil {
			if _, ok := status.FromError(err); !ok {
				err = status.FromContextError(err).Err()
			}
			s.err = err
		}
	}()
	return s
}

// wholeStream is a reply run to its end: its events, then its error or
// io.EOF.
type wholeStream struct {
	inProcessStream
	events []*inferencev1.ChatCompletionResponse
	next   int
	err    error
	// first holds the events of a typical whole reply, the content and
	// the finish, in the stream's own allocation: events starts in it.
	first [2]*inferencev1.ChatCompletionResponse
}

// Recv returns the next event, io.EOF after the last, or the engine's error.
func (s *wholeStream) Recv() (*inferencev1.ChatCompletionResponse, error) {
	if s.next < len(s.events) {
		ev := s.events[s.next]
		s.events[s.next] = nil
		s.next++
		return ev, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	return nil, io.EOF
}

// Buffered is the events Recv returns without waiting: all that are left.
func (s *wholeStream) Buffered() int { return len(s.events) - s.next }

func (s *wholeStream) SendMsg(any) error { return status.Error(codes.Unimplemented, "server stream") }
func (s *wholeStream) RecvMsg(m any) error {
	ev, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Merge(m.(proto.Message), ev)
	return nil
}

// wholeServerSide is the engine's end of a wholeStream.
type wholeServerSide wholeStream

// Send keeps ev for Recv; once the call's context has ended it refuses,
// as a stream's Send does, so that the engine stops.
func (s *wholeServerSide) Send(ev *inferencev1.ChatCompletionResponse) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	s.events = append(s.events, ev)
	return nil
}

func (s *wholeServerSide) SendMsg(m any) error {
	return s.Send(m.(*inferencev1.ChatCompletionResponse))
}
func (s *wholeServerSide) RecvMsg(any) error {
	return status.Error(codes.Unimplemented, "server stream")
}
