package perf_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// BenchmarkProxiedChat is the real path in one process, for profiles:
// the HTTP edge, the governed pipeline (the key with RPM and no TPD, the
// default policy, the durable audit event, its journal on a tmpfs when
// /dev/shm is one) and the vLLM engine in front of the instant upstream,
// 4 clients back to back. Everything runs in the benchmark's process
// (clients and upstream too), so a CPU profile is read by package:
//
//	go test -run '^$' -bench ProxiedChat -benchtime 20000x \
//	  -cpuprofile cpu.out -memprofile mem.out ./test/perf/
func BenchmarkProxiedChat(b *testing.B) {
	up := startUpstream(b)
	url := startProxied(b, up.URL)
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			body := chatRequest("mock/"+upstreamModel, stream)
			before := up.chats.Load()
			measureProxied(b, url, body, stream)
			if reached := up.chats.Load() - before; reached < int64(b.N) {
				b.Errorf("%d requests, %d reached the upstream", b.N, reached)
			}
		})
	}
}

// startProxied runs an appliance whose vLLM engine "mock" serves the
// upstream at upURL, and returns its chat completion URL.
func startProxied(b *testing.B, upURL string) string {
	b.Helper()
	eng, err := vllm.New(vllm.Config{Namespace: "mock", URL: upURL})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	cfg := appliance.Config{Engines: []inference.Engine{eng}}
	if cfg.Policy, err = policy.Load(context.Background(), "../../examples/policy", policy.LoadOptions{}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if shm, _ := isTmpfs("/dev/shm"); shm {
		if dir, err = os.MkdirTemp("/dev/shm", "tollgate-perf-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	signer, _, err := fleet.EnsureDev(dir, "app_perf")
	if err != nil {
		b.Fatal(err)
	}
	audit, err := auditlog.Open(filepath.Join(dir, "audit"), auditlog.Options{Signer: signer})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = audit.Close() }) // after the appliance stopped
	cfg.Audit, cfg.ApplianceID = audit, signer.ID
	url, _ := runAppliance(b, cfg)
	return url
}

// measureProxied sends b.N chat completions of body from 4 clients back to
// back, each read to its end and checked.
func measureProxied(b *testing.B, url, body string, stream bool) {
	const clients = 4
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	want := []byte("hello big world")
	if stream {
		want = []byte("data: [DONE]")
	}
	send := func() {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+proxyKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		got, _ := io.ReadAll(bufio.NewReader(resp.Body))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(got, want) {
			b.Errorf("status %d: %s", resp.StatusCode, got)
		}
	}
	for range 200 { // warm up connections and caches
		send()
	}
	var lat []time.Duration
	var mu sync.Mutex
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	cpuBefore := processCPU(b)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/clients+1)
			for range work {
				t := time.Now()
				send()
				local = append(local, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpuBefore).Microseconds())/float64(b.N), "cpu-µs/op")
	report(b, lat, elapsed)
}

// processCPU is the CPU time (user and system) the process has used: on a
// shared machine, where wall time says more of the neighbours than of the
// gateway, its difference per request is the figure to compare. It counts
// the clients and the upstream too, which no change of the gateway moves.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
