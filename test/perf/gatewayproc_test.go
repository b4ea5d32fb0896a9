package perf_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// gatewayCluster is what `tollgate gateway` needs before it starts, made
// once per benchmark: the shared embedded etcd of this test binary
// (etcdtest) holding the test seed's keys, the default policy bundle, and
// a fleet CA to issue appliance certificates with.
type gatewayCluster struct {
	endpoints []string
	policy    string // the default policy bundle's directory
	caDir     string // the fleet CA's directory (tollgate fleet init-ca)
	issued    int    // appliance certificates issued so far
}

// newGatewayCluster prepares a gatewayCluster. The seed's keys are written
// with the code `tollgate dev --seed` runs (internal/seed), into etcd's
// root as the gateway reads it: the gateway refuses seeds, and an
// operator's KeysService would need a mutual-TLS gRPC listener, which the
// gRPC columns would then measure too. The keys keep their secrets, so
// both modes use proxyKey.
func newGatewayCluster(tb testing.TB, bin string) *gatewayCluster {
	tb.Helper()
	dir := tb.TempDir()
	g := &gatewayCluster{endpoints: etcdtest.Endpoints(tb), caDir: filepath.Join(dir, "fleet-ca")}
	sd, err := seed.Load("../testdata/seed.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: g.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sd.Apply(ctx, keys.NewStore(cli, time.Now)); err != nil {
		tb.Fatalf("apply the seed to etcd: %v", err)
	}
	if g.policy, err = examples.WriteDefaultPolicy(filepath.Join(dir, "policy")); err != nil {
		tb.Fatalf("write the default policy: %v", err)
	}
	if err := os.MkdirAll(g.caDir, 0o700); err != nil {
		tb.Fatal(err)
	}
	runTollgate(tb, bin, "fleet", "init-ca", "--dir", g.caDir)
	return g
}

// startGateway runs `tollgate gateway` against g's etcd, with a new data
// directory holding an appliance certificate of g's fleet CA, the default
// policy, no central plane, the portal off and metrics on: the production
// process, without dev's embedded etcd, central plane and portal.
func startGateway(tb testing.TB, bin string, g *gatewayCluster, o devOptions) devProcess {
	tb.Helper()
	if o.tls || o.data != "" {
		tb.Fatal("startGateway: tls and data are options of startDev only")
	}
	g.issued++
	data := tb.TempDir()
	runTollgate(tb, bin, "fleet", "issue", "--appliance", fmt.Sprintf("app_bench%d", g.issued), "--ca-dir", g.caDir, "--out", data)
	args := []string{"gateway", "--etcd-endpoints", strings.Join(g.endpoints, ","), "--data", data, "--policy", g.policy,
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-level", "warn"}
	args = append(args, journalArgs(tb, o.journalParent)...)
	args = append(args, o.args...)
	return startProcess(tb, bin, "tollgate gateway", args, o.env)
}

// runTollgate runs a short tollgate command, failing the benchmark if it
// fails.
func runTollgate(tb testing.TB, bin string, args ...string) {
	tb.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("tollgate %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

func TestProxyProcessOf(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: "", want: devProcessName},
		{in: "dev", want: devProcessName},
		{in: "gateway", want: gatewayProcess},
		{in: "Gateway", err: true},
		{in: "central", err: true},
	} {
		got, err := proxyProcessOf(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("proxyProcessOf(%q) = %q, %v; want %q, error %t", tc.in, got, err, tc.want, tc.err)
		}
	}
}
