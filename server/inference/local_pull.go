package inference

import (
	"context"
	"io"
	"iter"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// errStopped is what the engine's send returns once the stream has been
// stopped (its context ended while the engine waited for the next Recv):
// the engine then returns, and Recv reports the context's error.
var errStopped = status.Error(codes.Canceled, "the stream was stopped")

// chatPull runs a streamed reply's engine as a pull iterator (iter.Pull)
// on the goroutine that calls Recv: each Recv resumes the engine until its
// next send, a coroutine switch where a goroutine of its own would hand
// each event over a channel, with a scheduler wake-up on either side. The
// engine runs no further ahead than the reader asks, so nothing is
// buffered and a slow client holds it back.
//
// The engine ends when it has sent its last event, when it sees ctx end
// while Recv runs it, or, when ctx ends while no Recv does, by the
// context's stop (context.AfterFunc), which resumes the engine with its
// send failing. As for a gRPC client's stream, the caller reads the stream
// to its end or ends ctx: the edge's request context and a gRPC handler's
// both end when the request does. CloseSend does neither, and a stream
// left unread under a context that never ends keeps its engine suspended,
// as a gRPC client's stream keeps its goroutines.
func (c *LocalClient) chatPull(ctx context.Context, in *inferencev1.ChatCompletionRequest) *pullStream {
	s := &pullStream{inProcessStream: inProcessStream{ctx: ctx}}
	s.next, s.stop = iter.Pull(func(yield func(*inferencev1.ChatCompletionResponse) bool) {
		s.yield = yield
		defer func() {
			if p := recover(); p != nil {
				s.err = status.Errorf(codes.Internal, "engine panicked: %v", p)
			}
			s.ended = true
		}()
		s.err = c.svc.ChatCompletion(in, (*pullServerSide)(s))
	})
	s.unwatch = context.AfterFunc(ctx, s.stopByContext)
	return s
}

// pullStream is both ends of an in-process server stream whose engine is
// pulled by Recv.
type pullStream struct {
	inProcessStream
	// mu makes Recv and the context's stop take turns: iter.Pull's next
	// and stop may run on any goroutine, but not at once.
	mu      sync.Mutex
	next    func() (*inferencev1.ChatCompletionResponse, bool)
	stop    func()
	unwatch func() bool                         // stops watching ctx once the engine has ended
	pending *inferencev1.ChatCompletionResponse // sent after the finish event
	// The engine's side, written on its coroutine while next or stop
	// runs it, read under mu after.
	yield func(*inferencev1.ChatCompletionResponse) bool
	err   error // what the engine returned, or its panic
	ended bool  // the engine has returned (or panicked)
	// stopped is set when ctx ended while the engine was waiting to be
	// resumed: its send failed, and Recv reports the context's error.
	stopped bool
}

// stopByContext ends an engine waiting for the next Recv when ctx ends:
// a caller that stops reading leaves no engine behind.
func (s *pullStream) stopByContext() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.stopped = true
	s.stop()
}

// Recv returns the next event, io.EOF after the last, or the engine's error.
func (s *pullStream) Recv() (*inferencev1.ChatCompletionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev := s.pending; ev != nil {
		s.pending = nil
		return ev, nil
	}
	ev, ok := s.next()
	if !ok {
		return nil, s.end()
	}
	if ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
		// The engine's last event: it is resumed now to return, its
		// send succeeding, rather than left waiting for a Recv its
		// caller, done with the reply, will not make (the vLLM engine
		// then counts the call as completed and its connection goes
		// back to the pool). An event sent after it all the same waits
		// for the next Recv.
		if after, ok := s.next(); ok {
			s.pending = after
		} else {
			s.unwatch()
		}
	}
	return ev, nil
}

// end is what Recv returns once the engine has ended: io.EOF, the
// engine's error as a gRPC status, or, for an engine stopped by its
// context, the context's.
func (s *pullStream) end() error {
	// The engine's coroutine is gone: stop is a no-op, and the context
	// no longer needs watching.
	s.unwatch()
	s.stop()
	switch {
	case s.stopped:
		return status.FromContextError(s.ctx.Err()).Err()
	case s.err == nil:
		return io.EOF
	}
	if _, ok := status.FromError(s.err); !ok {
		return status.FromContextError(s.err).Err()
	}
	return s.err
}

func (s *pullStream) SendMsg(any) error { return status.Error(codes.Unimplemented, "server stream") }
func (s *pullStream) RecvMsg(m any) error {
	ev, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Merge(m.(proto.Message), ev)
	return nil
}

// pullServerSide is the engine's end of a pullStream, used only on the
// engine's coroutine.
type pullServerSide pullStream

// Send hands ev to the Recv that resumed the engine and waits for the
// next; it refuses once the call's context has ended, as a stream's Send
// does, and fails once the stream is stopped.
func (s *pullServerSide) Send(ev *inferencev1.ChatCompletionResponse) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if !s.yield(ev) {
		return errStopped
	}
	return nil
}

func (s *pullServerSide) SendMsg(m any) error {
	return s.Send(m.(*inferencev1.ChatCompletionResponse))
}
func (s *pullServerSide) RecvMsg(any) error {
	return status.Error(codes.Unimplemented, "server stream")
}
