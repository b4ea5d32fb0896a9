package pipeline_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

type oneKey struct{ p *keys.Principal }

func (k oneKey) Authenticate(secret string) (*keys.Principal, error) {
	if secret != "tgk_test" {
		return nil, keys.ErrUnauthorized
	}
	return k.p, nil
}

// A call past the service's bound is UNAVAILABLE (service_unavailable,
// retry-after), whatever its key; a slot given back serves the next.
func TestServiceBoundsCallsInFlight(t *testing.T) {
	engines, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(engines)
	p := pipeline.New(pipeline.Config{Inference: local,
		Auth: oneKey{keys.NewPrincipal("acme", "key_test", "test", true, nil, 0, 0, nil, time.Time{})}})
	svc := pipeline.NewService(p, 1)
	cli := inferencev1.NewInferenceServiceClient(grpctest.Serve(t, func(r grpc.ServiceRegistrar) {
		inferencev1.RegisterInferenceServiceServer(r, svc)
	}))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tgk_test")
	chat := func(ctx context.Context, text string) (grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse], error) {
		return cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel,
			Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}}}})
	}
	// The first call holds the only slot: its reply waits a minute.
	holdCtx, release := context.WithCancel(ctx)
	defer release()
	if _, err := chat(holdCtx, "/delay 60000 held"); err != nil {
		t.Fatal(err)
	}
	awaitInFlight(t, svc, 1)

	var header metadata.MD
	_, err = cli.ListModels(ctx, &inferencev1.ListModelsRequest{}, grpc.Header(&header))
	st := status.Convert(err)
	info := grpcserver.ErrorInfo(st)
	if st.Code() != codes.Unavailable || info.GetReason() != "service_unavailable" || header.Get("retry-after")[0] != "1" {
		t.Fatalf("a call past the bound: %v (%v), header %v", st, info, header)
	}

	release()
	awaitInFlight(t, svc, 0)
	stream, err := chat(ctx, "served")
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := stream.Recv(); err != nil || ev.GetContent() == "" {
		t.Fatalf("after the slot was given back: %v, %v", ev, err)
	}
}

// awaitInFlight waits until the service serves n calls; the deadline only
// guards against a hang.
func awaitInFlight(t *testing.T, svc *pipeline.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for svc.InFlight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in flight, want %d", svc.InFlight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
