package appliance

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

// An engine may not take the built-in namespace, nor two the same one:
// the appliance refuses to start, naming it.
func TestEngineNamespacesAreUnique(t *testing.T) {
	eng := func(ns string) inference.Engine {
		e, err := vllm.New(vllm.Config{Namespace: ns, URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, extra := range [][]inference.Engine{{eng("builtin")}, {eng("gpu"), eng("emb"), eng("gpu")}} {
		err := Run(context.Background(), Config{GatewayAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Engines: extra})
		if err == nil || !strings.Contains(err.Error(), "two engines serve the namespace") {
			t.Errorf("%v", err)
		}
	}
}
