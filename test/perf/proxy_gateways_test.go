package perf_test

import (
	"slices"
	"strings"
	"testing"
)

// proxyGateway is one gateway BenchmarkProxy starts for a run, and the
// columns measured against it before it is stopped.
type proxyGateway struct {
	parent  string   // the journal's parent directory; empty: the data directory
	args    []string // flags after --vllm mock=<upstream>
	targets []proxyTarget
}

// proxyTarget is one model a gateway is measured with, by each kind.
type proxyTarget struct {
	name, model string
	kinds       []clientKind
}

// headsFast is the shortest head interval the gateway is meant to serve
// at (--head-interval): a head signing, and the applier round it forces,
// every second.
const headsFast = "1s"

// proxyGateways lists the gateways of a run and their columns: the
// journal on disk, and, when /dev/shm is a tmpfs (shm), on it, each
// through the vLLM engine and with builtin/echo, by HTTP and gRPC; then,
// on tmpfs too, builtin/echo by HTTP with a head signed every second, so
// that what head signing costs a request is measured beside the default
// interval's column (the tmpfs journal, so that its syncs do not hide it).
func proxyGateways(shm bool) []proxyGateway {
	both := []clientKind{httpClient, grpcClient}
	journals := []struct{ name, parent string }{{name: "disk"}}
	if shm {
		journals = append(journals, struct{ name, parent string }{"tmpfs", "/dev/shm"})
	}
	var out []proxyGateway
	for _, j := range journals {
		out = append(out, proxyGateway{parent: j.parent, targets: []proxyTarget{
			{name: "journal on " + j.name, model: "mock/" + upstreamModel, kinds: both},
			{name: "builtin, " + j.name, model: "builtin/echo", kinds: both},
		}})
	}
	if shm {
		out = append(out, proxyGateway{parent: "/dev/shm", args: []string{"--head-interval", headsFast},
			targets: []proxyTarget{{name: "builtin, tmpfs, heads " + headsFast, model: "builtin/echo", kinds: []clientKind{httpClient}}}})
	}
	return out
}

// columnName names a target's column as kind reaches it; a target reached
// by one kind alone is named by itself.
func (t proxyTarget) columnName(kind clientKind) string {
	if len(t.kinds) > 1 {
		return t.name + " (" + kind.name + ")"
	}
	return t.name
}

func TestProxyGateways(t *testing.T) {
	for _, tc := range []struct {
		shm  bool
		want []string // each column: name, then the gateway's extra flags
	}{
		{shm: false, want: []string{
			"journal on disk (http) |", "journal on disk (grpc) |", "builtin, disk (http) |", "builtin, disk (grpc) |",
		}},
		{shm: true, want: []string{
			"journal on disk (http) |", "journal on disk (grpc) |", "builtin, disk (http) |", "builtin, disk (grpc) |",
			"journal on tmpfs (http) |", "journal on tmpfs (grpc) |", "builtin, tmpfs (http) |", "builtin, tmpfs (grpc) |",
			"builtin, tmpfs, heads 1s | --head-interval 1s",
		}},
	} {
		var got []string
		for _, g := range proxyGateways(tc.shm) {
			if (g.parent != "") != strings.Contains(g.targets[0].name, "tmpfs") {
				t.Errorf("shm %v: %s: journal parent %q", tc.shm, g.targets[0].name, g.parent)
			}
			for _, target := range g.targets {
				for _, kind := range target.kinds {
					got = append(got, strings.TrimSpace(target.columnName(kind)+" | "+strings.Join(g.args, " ")))
				}
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("shm %v: columns\n%q\nwant\n%q", tc.shm, got, tc.want)
		}
	}
}
