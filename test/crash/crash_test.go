// Package crash_test kills a loaded `tollgate dev` with SIGKILL and checks,
// after a restart on the same data, that no acknowledged request lost its
// audit event: sequences are contiguous, the new head verifies under the
// fleet CA and extends the last head signed before the crash.
package crash_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditservice "github.com/tollgate-dev/tollgate/audit/service"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	"github.com/tollgate-dev/tollgate/internal/sysmon"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

const (
	tenant = "acme"
	key    = "tgk_test_acme_all"
	// auditToken reads acme's audit trail (the seed's audit_tokens).
	auditToken = "tga_test_acme_audit"
)

var bin string

func TestMain(m *testing.M) { tollgatetest.Main(m, &bin) }

// proc is a running `tollgate dev`.
type proc struct {
	cmd  *exec.Cmd
	base string // http://host:port/v1
	grpc string
}

func startDev(t *testing.T, data string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--seed", "../testdata/seed.yaml", "--head-interval", "50ms", "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs, err := tollgatetest.Banner(stdout, "Base URL", "gRPC")
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("tollgate dev: %v", err)
	}
	checkMonitorAwake(t, cmd.Process.Pid)
	return &proc{cmd: cmd, base: addrs["Base URL"], grpc: addrs["gRPC"]}
}

// checkMonitorAwake checks that the process started over with the
// runtime's system monitor kept out of its deep sleep (package sysmon):
// its environment, as the kernel holds it, carries sysmon.Setting.
func checkMonitorAwake(t *testing.T, pid int) {
	t.Helper()
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
			if !slices.Contains(strings.Split(string(v), ","), sysmon.Setting) {
				t.Errorf("tollgate dev runs with GODEBUG=%s, want %s in it", v, sysmon.Setting)
			}
			return
		}
	}
	t.Errorf("tollgate dev runs without GODEBUG, want %s in it", sysmon.Setting)
}

func (p *proc) audit(t *testing.T) auditv1.AuditServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(auditToken)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return auditv1.NewAuditServiceClient(conn)
}

// bearer sends a token as `authorization: Bearer <token>` with every call,
// over loopback without TLS too.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// request sends one chat request and returns its id once the client has
// seen the whole response: the body of a plain reply, [DONE] of a stream.
func request(ctx context.Context, base string, stream bool) (string, error) {
	body := fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"crash test payload"}]}`, stream)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	if stream && !bytes.HasSuffix(data, []byte("data: [DONE]\n\n")) {
		return "", fmt.Errorf("stream ended without [DONE]")
	}
	if !stream {
		var c struct{ ID string }
		if err := json.Unmarshal(data, &c); err != nil {
			return "", err
		}
	}
	return resp.Header.Get("x-request-id"), nil
}

func TestSIGKILLLosesNoAcknowledgedRequest(t *testing.T) {
	data := t.TempDir()
	p := startDev(t, data)
	day := time.Now().UTC().Format("2006-01-02")

	// Load: writers send requests until the process dies under them.
	var (
		mu    sync.Mutex
		acked []string
	)
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id, err := request(ctx, p.base, (w+i)%2 == 0)
				if err != nil {
					continue // in flight at the kill: not acknowledged
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	// Wait for enough acknowledged requests and a signed head covering some.
	cli := p.audit(t)
	var before head.Head
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no signed head and %d acknowledged requests after 60s", count())
		}
		if count() >= 300 {
			if resp, err := cli.GetHead(context.Background(), &auditv1.GetHeadRequest{TenantId: tenant, Day: day}); err == nil && resp.GetHead().GetEventCount() > 0 {
				before = auditservice.HeadFromProto(resp.GetHead())
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	stopLoad()
	wg.Wait()
	mu.Lock()
	ackedIDs := append([]string(nil), acked...)
	mu.Unlock()
	t.Logf("killed with %d acknowledged requests; last head before the kill covers %d", len(ackedIDs), before.EventCount)

	// Restart on the same data.
	p2 := startDev(t, data)
	defer func() { _ = p2.cmd.Process.Kill(); _ = p2.cmd.Wait() }()
	cli2 := p2.audit(t)

	// Every acknowledged request has its event, each with its own sequence.
	seqs := make(map[uint64]string, len(ackedIDs))
	for _, id := range ackedIDs {
		ev, err := cli2.GetEvent(context.Background(), &auditv1.GetEventRequest{TenantId: tenant, RequestId: id})
		if err != nil {
			t.Fatalf("acknowledged request %s has no audit event after the crash: %v", id, err)
		}
		s := ev.GetEvent().GetSequence()
		if other, dup := seqs[s]; dup {
			t.Fatalf("sequence %d used by %s and %s", s, other, id)
		}
		seqs[s] = id
	}

	// The head after restart covers everything recorded: with one tenant,
	// event_count == last_sequence means the sequences 1..N have no gap.
	var after head.Head
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := cli2.GetHead(context.Background(), &auditv1.GetHeadRequest{TenantId: tenant, Day: day})
		if err == nil {
			after = auditservice.HeadFromProto(resp.GetHead())
			if after.EventCount >= uint64(len(ackedIDs)) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no head covering the %d acknowledged events after restart (last: %+v, err %v)", len(ackedIDs), after, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after.EventCount != after.LastSequence {
		t.Fatalf("head after restart: event_count %d != last_sequence %d: a gap or duplicate in the sequences", after.EventCount, after.LastSequence)
	}
	for s := range seqs {
		if s < 1 || s > after.LastSequence {
			t.Fatalf("sequence %d outside 1..%d", s, after.LastSequence)
		}
	}

	ca, err := fleet.LoadCACert(filepath.Join(data, fleet.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := head.Verify(after, ca); err != nil {
		t.Fatalf("head after restart does not verify: %v", err)
	}
	cons, err := cli2.GetConsistencyProof(context.Background(), &auditv1.GetConsistencyProofRequest{
		TenantId: tenant, Day: day, FromSize: before.EventCount, ToSize: after.EventCount,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyConsistency(before, after, cons.GetHashes()); err != nil {
		t.Fatalf("head after restart does not extend the head before the crash: %v", err)
	}
}
