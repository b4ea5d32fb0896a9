package appliance

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

func TestEngineNamespacesAreUnique(t *testing.T) {
	eng := func(ns string) inference.Engine {
		e, err := vllm.New(vllm.Config{Namespace: ns, URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if got, err := withBuiltin([]inference.Engine{eng("gpu"), eng("emb")}); err != nil || len(got) != 3 {
		t.Fatalf("%d engines, %v", len(got), err)
	}
	for _, extra := range [][]inference.Engine{{eng("builtin")}, {eng("gpu"), eng("gpu")}} {
		if _, err := withBuiltin(extra); err == nil || !strings.Contains(err.Error(), "two engines") {
			t.Errorf("%v", err)
		}
	}
}
