package policy

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// revisionRego decides with a reason naming its own revision, so every
// decision shows which bundle it was evaluated on, start to finish.
func revisionRego(rev string) string {
	return fmt.Sprintf(`package tollgate.gateway

deny contains "ci" if {
	input.key.label == "ci"
	count(input.request.tools) > 0
}

decision := {"allow": false, "reason": "%[1]s"} if count(deny) > 0
else := {"allow": true, "reason": "%[1]s", "tools": [t | some t in input.request.tools; t != "hidden"]}
`, rev)
}

// TestReloadUnderLoad swaps bundles repeatedly while many goroutines
// decide: no decision fails, and each one is entirely from one of the two
// bundles (revision, digest and outcome agree).
func TestReloadUnderLoad(t *testing.T) {
	paths := map[string]string{"rev-a": regoBundle(t, "rev-a", revisionRego("rev-a")), "rev-b": regoBundle(t, "rev-b", revisionRego("rev-b"))}
	broken := regoBundle(t, "broken", "package tollgate.gateway\n\ndecision := {\n")
	e := load(t, paths["rev-a"])
	digests := map[string]string{"rev-a": e.Active().Digest()}
	if err := e.ReloadFrom(context.Background(), paths["rev-b"]); err != nil {
		t.Fatal(err)
	}
	digests["rev-b"] = e.Active().Digest()

	var (
		stop     atomic.Bool
		failures atomic.Int64
		seen     sync.Map // revision → *atomic.Int64
		firstErr sync.Once
		errMsg   string
		wg       sync.WaitGroup
	)
	for _, rev := range []string{"rev-a", "rev-b"} {
		seen.Store(rev, new(atomic.Int64))
	}
	fail := func(format string, args ...any) {
		failures.Add(1)
		firstErr.Do(func() { errMsg = fmt.Sprintf(format, args...) })
	}
	k := key("app", nil, "tool:*")
	ci := key("ci", nil, "tool:*")
	workers := 4 * runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				in := chat(k, auto, "get_a", "hidden")
				if (w+i)%3 == 0 {
					in = chat(ci, auto, "get_a")
				}
				d, err := e.Decide(context.Background(), in)
				if err != nil {
					fail("Decide: %v", err)
					continue
				}
				counter, ok := seen.Load(d.BundleRevision)
				switch {
				case !ok:
					fail("unknown revision %q", d.BundleRevision)
				case d.Reason != d.BundleRevision || d.BundleDigest != digests[d.BundleRevision]:
					fail("mixed decision: revision %s, digest %s, reason %s", d.BundleRevision, d.BundleDigest, d.Reason)
				case in.Key == ci && d.Allow, in.Key == k && (!d.Allow || len(d.AllowedTools) != 1):
					fail("wrong outcome %+v", d)
				default:
					counter.(*atomic.Int64).Add(1)
				}
			}
		})
	}

	// Swap 50 times; after each swap wait until some decision has been
	// made on the new bundle, so swaps and decisions really interleave.
	for i := range 50 {
		rev := []string{"rev-a", "rev-b"}[i%2]
		if i%10 == 5 {
			if err := e.ReloadFrom(context.Background(), broken); err == nil {
				t.Error("broken bundle accepted")
			}
		}
		c, _ := seen.Load(rev)
		before := c.(*atomic.Int64).Load()
		if err := e.ReloadFrom(context.Background(), paths[rev]); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
		for c.(*atomic.Int64).Load() == before && failures.Load() == 0 {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()

	if n := failures.Load(); n > 0 {
		t.Fatalf("%d failed decisions, first: %s", n, errMsg)
	}
	for _, rev := range []string{"rev-a", "rev-b"} {
		c, _ := seen.Load(rev)
		t.Logf("%s: %d decisions", rev, c.(*atomic.Int64).Load())
	}
}
