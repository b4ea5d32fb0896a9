//go:build linux

// Package diskfull_test runs `tollgate dev` with its audit journal on a
// small tmpfs and fills it: requests are refused with 503 in the spec's
// envelope once it is full, /healthz says why, every request answered 200
// keeps its event, and the gateway serves again once space is freed,
// without a restart.
package diskfull_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	"github.com/tollgate-dev/tollgate/internal/tmpfstest"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

const (
	tenant     = "acme"
	key        = "tgk_test_acme_all"
	auditToken = "tga_test_acme_audit"
)

var bin string

func TestMain(m *testing.M) { tollgatetest.Main(m, &bin) }

type proc struct {
	cmd        *exec.Cmd
	base, grpc string
}

func startDev(t *testing.T, data, journal string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--data", data, "--audit-journal-dir", journal,
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
		"--seed", "../testdata/seed.yaml", "--log-level", "warn")
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
	p := &proc{cmd: cmd, base: addrs["Base URL"], grpc: addrs["gRPC"]}
	t.Cleanup(p.stop)
	return p
}

func (p *proc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
}

type reply struct {
	status     int
	id         string
	retryAfter string
	body       []byte
}

// chat sends one chat request with content of n random bytes, base64.
func chat(t *testing.T, base string, n int) reply {
	t.Helper()
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	body := fmt.Sprintf(`{"model":"builtin/echo","messages":[{"role":"user","content":%q}]}`, base64.StdEncoding.EncodeToString(raw))
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, id: resp.Header.Get("x-request-id"), retryAfter: resp.Header.Get("Retry-After"), body: data}
}

func health(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// checkFull asserts r is the full disk's refusal in the spec's envelope.
func checkFull(t *testing.T, r reply) {
	t.Helper()
	var env struct {
		Error struct {
			Code, Type, Message string
		}
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("503 body %q: %v", r.body, err)
	}
	if env.Error.Code != "service_unavailable" || env.Error.Type != "server_error" || !strings.Contains(env.Error.Message, "disk is full") {
		t.Fatalf("refusal while full: %s", r.body)
	}
	if r.retryAfter == "" {
		t.Fatal("refusal while full has no Retry-After")
	}
}

func TestAuditDiskFull(t *testing.T) {
	data := t.TempDir()
	mnt := tmpfstest.Mount(t, 6<<20)
	journal := filepath.Join(mnt, "journal")
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDev(t, data, journal)

	var acked, refused []string
	var full reply
	for i := 0; i < 200 && full.status == 0; i++ {
		r := chat(t, p.base, 48<<10)
		switch r.status {
		case http.StatusOK:
			acked = append(acked, r.id)
		case http.StatusServiceUnavailable:
			full = r
			refused = append(refused, r.id)
		default:
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if full.status == 0 {
		t.Fatalf("%d requests on a 6 MiB audit disk were never refused", len(acked))
	}
	if len(acked) == 0 {
		t.Fatal("the disk was full before any request was answered")
	}
	checkFull(t, full)
	// Refused at once now, before the engine runs.
	next := chat(t, p.base, 1<<10)
	if next.status != http.StatusServiceUnavailable {
		t.Fatalf("request while full: %d %s", next.status, next.body)
	}
	checkFull(t, next)
	if code, h := health(t, p.base); code != http.StatusServiceUnavailable || h["status"] != "degraded" || !strings.Contains(h["detail"], "disk is full") {
		t.Fatalf("/healthz while full: %d %v", code, h)
	}

	// Space returns: served again within the probe interval, no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := chat(t, p.base, 1<<10)
		if r.status == http.StatusOK {
			acked = append(acked, r.id)
			break
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after freeing space: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond) // the probe runs every second
	}
	if code, h := health(t, p.base); code != http.StatusOK {
		t.Fatalf("/healthz after space returned: %d %v", code, h)
	}
	t.Logf("%d requests answered 200, %d refused while full", len(acked), len(refused))

	// Restart: every request answered 200 has its event; the refused
	// one does not.
	p.stop()
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("tollgate dev exited with %v", p.cmd.ProcessState)
	}
	p2 := startDev(t, data, journal)
	conn, err := grpc.NewClient(p2.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(auditToken)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := auditv1.NewAuditServiceClient(conn)
	for _, id := range acked {
		if _, err := cli.GetEvent(context.Background(), &auditv1.GetEventRequest{TenantId: tenant, RequestId: id}); err != nil {
			t.Fatalf("event of acknowledged %s after restart: %v", id, err)
		}
	}
	for _, id := range refused {
		_, err := cli.GetEvent(context.Background(), &auditv1.GetEventRequest{TenantId: tenant, RequestId: id})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("event of refused %s after restart: %v, want NotFound", id, err)
		}
	}
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
