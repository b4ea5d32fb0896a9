package central_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
)

// benchLeaves is the size of the benchmark's tree (a busy tenant's day).
const benchLeaves = 100_000

// benchPlane is a plane holding one tree of benchLeaves leaves, with
// their canonical leaves, which every proof carries.
func benchPlane(b *testing.B) (*centraltest.Plane, *centraltest.Tree) {
	return benchPlaneOf(b, (*centraltest.Tree).Add)
}

// benchPlaneOf is benchPlane with the tree's leaves made by add (Add:
// with canonical leaves; AddFast: hashes alone).
func benchPlaneOf(b *testing.B, add func(*centraltest.Tree, int) []store.Leaf) (*centraltest.Plane, *centraltest.Tree) {
	b.Helper()
	p := centraltest.StartPlane(b)
	if err := p.Tokens.SetAuditTokens(context.Background(), "acme", []string{"tga_bench_reader"}); err != nil {
		b.Fatal(err)
	}
	tr := centraltest.NewTree("acme", p.Fleet.Appliance(b, "app_bench"))
	add(tr, benchLeaves)
	u := tr.Upload(b, 0)
	if _, err := centraltest.Publish(context.Background(), p.IngestClient(b, tr.App), u); err != nil {
		b.Fatal(err)
	}
	return p, tr
}

// BenchmarkProofREST serves inclusion proofs end to end: HTTP GET through
// grpc-gateway, the gRPC interceptors (token, protovalidate), the embedded
// store, JSON; 16 clients in parallel over loopback keep-alive
// connections. Proofs of leaves with their canonical bytes, and
// (hashes) of leaves sent with hashes alone, whose proofs carry none.
func BenchmarkProofREST(b *testing.B) {
	for _, c := range adds {
		b.Run(c.name, func(b *testing.B) { benchProofREST(b, c.add) })
	}
}

// adds are the two kinds of leaves an appliance sends.
var adds = []struct {
	name string
	add  func(*centraltest.Tree, int) []store.Leaf
}{
	{"leaves", (*centraltest.Tree).Add},
	{"hashes", (*centraltest.Tree).AddFast},
}

func benchProofREST(b *testing.B, add func(*centraltest.Tree, int) []store.Leaf) {
	p, tr := benchPlaneOf(b, add)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetParallelism(8) // × GOMAXPROCS goroutines
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			l := tr.Leaves[rng.IntN(len(tr.Leaves))]
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s",
				p.BaseURL, tr.App.ID, tr.Day, l.RequestID), nil)
			req.Header.Set("Authorization", "Bearer tga_bench_reader")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proofs/s")
}

// BenchmarkProofStore reads proof material from the embedded store alone.
func BenchmarkProofStore(b *testing.B) {
	p, tr := benchPlane(b)
	id := store.TreeID{TenantID: "acme", ApplianceID: tr.App.ID, Day: tr.Day}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		for pb.Next() {
			if _, err := p.Store.Proof(context.Background(), id, tr.Leaves[rng.IntN(len(tr.Leaves))].RequestID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proofs/s")
}

// BenchmarkIngest publishes heads of 1,000 new leaves each over mTLS,
// with the leaves' canonical bytes (checked and stored) and, as an
// appliance that predates them sends them, with hashes alone.
func BenchmarkIngest(b *testing.B) {
	for _, c := range adds {
		b.Run(c.name, func(b *testing.B) {
			p := centraltest.StartPlane(b)
			tr := centraltest.NewTree("acme", p.Fleet.Appliance(b, "app_bench"))
			client := p.IngestClient(b, tr.App)
			uploads := make([]ingest.Upload, b.N)
			for i := range uploads {
				c.add(tr, 1000)
				uploads[i] = tr.Upload(b, uint64(i*1000))
			}
			b.ResetTimer()
			start := time.Now()
			for _, u := range uploads {
				if _, err := centraltest.Publish(context.Background(), client, u); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*1000)/time.Since(start).Seconds(), "leaves/s")
		})
	}
}
