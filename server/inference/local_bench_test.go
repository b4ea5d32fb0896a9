package inference_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
)

// BenchmarkLocalChat is an in-process chat call of the built-in echo
// model, checked by the client or marked as checked by its caller
// (inference.Validated): the difference is what one protovalidate check
// of a small chat request costs.
func BenchmarkLocalChat(b *testing.B) {
	local := inference.NewLocalClient(newService(b))
	for _, bc := range []struct {
		name string
		opts []grpc.CallOption
	}{
		{"checked", nil},
		{"validated", []grpc.CallOption{inference.Validated()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				stream, err := local.ChatCompletion(context.Background(), chat(builtin.EchoModel, "hello big world"), bc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := stream.Recv(); err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}
