// Package etcdtest starts one embedded etcd server per test binary and hands
// each test a client confined to a key prefix of its own, so tests of one
// package share a server without seeing each other's keys.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m) }
//
// and in a test:
//
//	cli := etcdtest.Client(t)
package etcdtest

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

var (
	once    sync.Once
	server  *embed.Etcd
	dataDir string
	errUp   error
	seq     atomic.Int64
)

// Main runs the package's tests and stops the shared server afterwards.
func Main(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.Close()
		_ = os.RemoveAll(dataDir)
	}
	os.Exit(code)
}

// Endpoints returns the client URLs of the shared server, starting it first.
func Endpoints(tb testing.TB) []string {
	tb.Helper()
	once.Do(start)
	if errUp != nil {
		tb.Fatalf("embedded etcd: %v", errUp)
	}
	eps := make([]string, 0, len(server.Clients))
	for _, l := range server.Clients {
		eps = append(eps, "http://"+l.Addr().String())
	}
	return eps
}

func start() {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		errUp = err
		return
	}
	dataDir = dir
	e, err := embed.StartEtcd(newConfig(dir, "http"))
	if err != nil {
		errUp = fmt.Errorf("start: %w", err)
		return
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		errUp = fmt.Errorf("not ready after 30s")
		return
	}
	server = e
}

// newConfig is a one-member server's configuration in dir, its clients
// served with scheme (http or https), on free loopback ports.
func newConfig(dir, scheme string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Port 0 picks free ports; callers read the bound ones from Clients.
	lc, _ := url.Parse(scheme + "://127.0.0.1:0")
	lp, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*lc}
	cfg.AdvertiseClientUrls = []url.URL{*lc}
	cfg.ListenPeerUrls = []url.URL{*lp}
	cfg.AdvertisePeerUrls = []url.URL{*lp}
	cfg.InitialCluster = "default=http://127.0.0.1:0"
	cfg.UnsafeNoFsync = true // test data is thrown away
	return cfg
}

// Client returns a client of the shared server whose keys are confined to a
// prefix unique to this call. It is closed when the test ends.
func Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return ClientAt(tb, Endpoints(tb), Prefix(tb))
}

// Prefix returns a key prefix unique to this call. Several clients made
// with ClientAt and one prefix share their keys, as gateways of one
// cluster do.
func Prefix(tb testing.TB) string {
	return fmt.Sprintf("/t%d-%s/", seq.Add(1), strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name()))
}

// ClientAt returns a client of endpoints confined to prefix, closed when
// the test ends.
func ClientAt(tb testing.TB, endpoints []string, prefix string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	cli.KV = namespace.NewKV(cli.KV, prefix)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, prefix)
	cli.Lease = namespace.NewLease(cli.Lease, prefix)
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}
