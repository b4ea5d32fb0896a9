package perf_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// grpcClient reaches the appliance's gRPC InferenceService, as an internal
// service does: the same chat over one HTTP/2 connection, the virtual key
// as metadata.
var grpcClient = clientKind{name: "grpc", dial: dialGRPC}

// dialGRPC returns a requester over one gRPC connection to ep.grpc. A
// "plain" request is a ChatCompletion read to its end (the service only
// streams); "streamed" is the same, timed to its first event.
func dialGRPC(ep endpoint) (requester, error) {
	host, _, err := net.SplitHostPort(ep.grpc)
	if err != nil || host != "127.0.0.1" {
		return requester{}, fmt.Errorf("%q: the benchmark sends only to 127.0.0.1", ep.grpc)
	}
	conn, err := grpc.NewClient(ep.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return requester{}, err
	}
	cli := inferencev1.NewInferenceServiceClient(conn)
	req := &inferencev1.ChatCompletionRequest{Model: ep.model, Messages: []*inferencev1.Message{
		{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: chatWords}},
	}}
	md := metadata.Pairs("authorization", "Bearer "+ep.key)
	chat := func(first func()) error {
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), requestTimeout)
		defer cancel()
		stream, err := cli.ChatCompletion(ctx, req)
		if err != nil {
			return err
		}
		var text strings.Builder
		for i := 0; ; i++ {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if i == 0 && first != nil {
				first()
			}
			text.WriteString(ev.GetContent())
		}
		if !strings.Contains(text.String(), "hello") {
			return fmt.Errorf("reply %q", text.String())
		}
		return nil
	}
	return requester{
		plain: func() error { return chat(nil) },
		streamed: func() (time.Duration, error) {
			start := time.Now()
			var ttfb time.Duration
			err := chat(func() { ttfb = time.Since(start) })
			return ttfb, err
		},
		close: func() { _ = conn.Close() },
	}, nil
}
