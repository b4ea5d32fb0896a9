package inference_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// probe is an engine that sends pieces, then either finishes or holds the
// reply open until its context ends, and says when it returns and what.
type probe struct {
	pieces  int
	hold    bool
	sent    atomic.Int32
	holding chan struct{} // closed when it starts holding
	// returned receives the engine's return value: once it has, the
	// engine has ended and its coroutine with it.
	returned chan error
}

func newProbe(pieces int, hold bool) *probe {
	return &probe{pieces: pieces, hold: hold, holding: make(chan struct{}), returned: make(chan error, 1)}
}

func (*probe) Namespace() string { return "probe" }
func (*probe) Models() []*inferencev1.Model {
	return []*inferencev1.Model{{Id: "probe/m", Kind: inferencev1.ModelKind_MODEL_KIND_CHAT}}
}
func (p *probe) ChatCompletion(ctx context.Context, _ *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) (err error) {
	defer func() { p.returned <- err }()
	for range p.pieces {
		if err := send(&inferencev1.ChatCompletionResponse{Content: "x "}); err != nil {
			return err
		}
		p.sent.Add(1)
	}
	if p.hold {
		close(p.holding)
		<-ctx.Done()
		return ctx.Err()
	}
	return send(&inferencev1.ChatCompletionResponse{FinishReason: inferencev1.FinishReason_FINISH_REASON_STOP,
		Usage: &inferencev1.Usage{PromptTokens: 1, CompletionTokens: int64(p.pieces)}})
}
func (*probe) Embed(context.Context, *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	return nil, status.Error(codes.Unimplemented, "no embeddings")
}
func (*probe) CountTokens(context.Context, *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	return &inferencev1.CountTokensResponse{PromptTokens: 1}, nil
}

func probeClient(t *testing.T, p *probe) *inference.LocalClient {
	t.Helper()
	svc, err := inference.NewService(p)
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(svc)
	return local
}

// A stream's engine runs only while Recv asks for an event: it is never
// ahead of the reader by a single event, and has returned once its finish
// event is read.
func TestLocalStreamEngineRunsWhenPulled(t *testing.T) {
	p := newProbe(40, false)
	stream, err := probeClient(t, p).ChatCompletion(context.Background(), chat("probe/m", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if n := p.sent.Load(); n != 0 {
		t.Fatalf("%d pieces sent before the first Recv", n)
	}
	for i := 1; i <= p.pieces; i++ {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		// The engine counts a piece once its send has returned, that
		// is when the next Recv resumes it.
		if n := p.sent.Load(); n != int32(i-1) {
			t.Fatalf("after Recv %d the engine had sent %d pieces", i, n)
		}
	}
	if ev, err := stream.Recv(); err != nil || ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_STOP {
		t.Fatalf("finish: %v, %v", ev, err)
	}
	// The pipeline reads no further than the finish event: the engine
	// has returned by then, its last send a success, and was not left
	// for the call's context to stop.
	select {
	case err := <-p.returned:
		if err != nil {
			t.Fatalf("engine returned %v", err)
		}
	default:
		t.Fatal("the engine had not returned when its finish event was read")
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after the finish: %v, want EOF", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv again: %v, want EOF", err)
	}
}

// Every way a stream can end early ends its engine, which then returns:
// a reader that stops reading and ends the call's context (as the edge
// does when its client goes or a write fails, and a gRPC handler when it
// returns), before the first Recv or between two, and a context ended
// while the engine waits inside Recv. Recv then reports the context's
// error.
func TestLocalStreamEarlyEndStopsEngine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pieces   int
		hold     bool
		read     int // Recv calls before the context ends
		duringRv bool
		expired  bool // the context's deadline passed before the call
		want     codes.Code
	}{
		{name: "deadline passed before the call", pieces: 3, read: 0, expired: true, want: codes.DeadlineExceeded},
		{name: "cancelled before the first Recv", pieces: 3, read: 0, want: codes.Canceled},
		{name: "reader stops mid-reply", pieces: 100, read: 2, want: codes.Canceled},
		{name: "reader stops before the finish", pieces: 3, read: 3, want: codes.Canceled},
		{name: "cancelled while the engine waits in Recv", pieces: 1, hold: true, read: 1, duringRv: true, want: codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProbe(tc.pieces, tc.hold)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.expired {
				ctx, cancel = context.WithDeadline(ctx, time.Unix(1, 0))
				defer cancel()
			}
			stream, err := probeClient(t, p).ChatCompletion(ctx, chat("probe/m", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.read {
				if _, err := stream.Recv(); err != nil {
					t.Fatalf("Recv %d: %v", i+1, err)
				}
			}
			if tc.duringRv {
				go func() {
					<-p.holding
					cancel()
				}()
			} else {
				cancel()
			}
			if !tc.duringRv {
				// Nobody reads any more: the context alone must
				// end the engine (unless it never started).
				if tc.read > 0 {
					if err := <-p.returned; err == nil {
						t.Fatal("the engine returned no error when stopped")
					}
				}
			}
			if _, err := stream.Recv(); status.Code(err) != tc.want {
				t.Fatalf("Recv after the end: %v, want %v", err, tc.want)
			}
			if tc.duringRv {
				if err := <-p.returned; !errors.Is(err, context.Canceled) {
					t.Fatalf("engine returned %v, want its context's error", err)
				}
			}
		})
	}
}
