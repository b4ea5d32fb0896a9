package perf_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// runAppliance runs an in-process appliance of cfg on loopback, its keys
// those of the test seed in the package's embedded etcd (cfg's Etcd,
// listen addresses and logger are filled in), until stop or the end of the
// test, and returns its chat completion URL and stop. An audit log in cfg
// stays the caller's to close: a Cleanup registered before this call runs
// after the appliance stopped.
func runAppliance(tb testing.TB, cfg appliance.Config) (url string, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Etcd = etcdtest.Client(tb)
	s, err := seed.Load("../testdata/seed.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Apply(ctx, keys.NewStore(cfg.Etcd, nil)); err != nil {
		tb.Fatal(err)
	}
	cfg.GatewayAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	ready := make(chan appliance.Addrs, 1)
	done := make(chan error, 1)
	cfg.OnReady = func(a appliance.Addrs) { ready <- a }
	go func() { done <- appliance.Run(ctx, cfg) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			tb.Errorf("appliance: %v", err)
		}
	})
	tb.Cleanup(stop)
	select {
	case a := <-ready:
		return "http://" + a.Gateway + "/v1/chat/completions", stop
	case err := <-done:
		tb.Fatalf("appliance: %v", err)
		return "", nil
	}
}
