package crash_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	auditservice "github.com/tollgate-dev/tollgate/audit/service"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// longPrompt makes builtin/echo stream 200 pieces, 50 ms apart: ten
// seconds, far longer than the test waits before the kill.
var longPrompt = "/delay 50 " + strings.TrimSpace(strings.Repeat("word ", 200))

// opened is a stream that has delivered at least 10 events.
type opened struct {
	id       string
	endpoint string
}

// httpStream starts a stream on path and reports it on ready once its
// client has read 10 events; it then reads on until the connection dies.
func httpStream(ctx context.Context, base, path, body string, ready chan<- opened, failed chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		failed <- fmt.Errorf("%s: %w", path, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		failed <- fmt.Errorf("%s: status %d", path, resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
			if events == 10 {
				ready <- opened{id: resp.Header.Get("x-request-id"), endpoint: "/v1" + path}
			}
		}
	}
	if events < 10 {
		failed <- fmt.Errorf("%s: stream ended after %d events", path, events)
	}
}

// grpcStream is httpStream for InferenceService.ChatCompletion.
func grpcStream(ctx context.Context, cli inferencev1.InferenceServiceClient, ready chan<- opened, failed chan<- error) {
	st, err := cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: "builtin/echo",
		Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: longPrompt}}}})
	if err != nil {
		failed <- err
		return
	}
	events := 0
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
		events++
		if events == 10 {
			hdr, err := st.Header()
			if err != nil || len(hdr.Get("x-request-id")) != 1 {
				failed <- fmt.Errorf("gRPC stream header %v: %w", hdr, err)
				return
			}
			ready <- opened{id: hdr.Get("x-request-id")[0], endpoint: inferencev1.InferenceService_ChatCompletion_FullMethodName}
		}
	}
	if events < 10 {
		failed <- fmt.Errorf("gRPC stream ended after %d events", events)
	}
}

// TestSIGKILLDuringStreamsLosesNoStream: ten streams, on every streamed
// endpoint of both fronts, each having delivered 10 events, are cut by a
// SIGKILL of the gateway. After a restart on the same data each has an
// event, interrupted (status 599), covered by a signed head that verifies
// and with an inclusion proof against it.
func TestSIGKILLDuringStreamsLosesNoStream(t *testing.T) {
	data := t.TempDir()
	p := startDev(t, data)
	day := time.Now().UTC().Format("2006-01-02")

	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(key)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	inf := inferencev1.NewInferenceServiceClient(conn)

	chat := fmt.Sprintf(`{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":%q}]}`, longPrompt)
	completion := fmt.Sprintf(`{"model":"builtin/echo","stream":true,"prompt":%q}`, longPrompt)
	responses := fmt.Sprintf(`{"model":"builtin/echo","stream":true,"input":%q}`, longPrompt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 10
	ready, failed := make(chan opened, streams), make(chan error, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 5 {
			case 0, 1:
				httpStream(ctx, p.base, "/chat/completions", chat, ready, failed)
			case 2:
				httpStream(ctx, p.base, "/completions", completion, ready, failed)
			case 3:
				httpStream(ctx, p.base, "/responses", responses, ready, failed)
			case 4:
				grpcStream(ctx, inf, ready, failed)
			}
		}()
	}
	var cut []opened
	timeout := time.After(60 * time.Second)
	for len(cut) < streams {
		select {
		case o := <-ready:
			cut = append(cut, o)
		case err := <-failed:
			t.Fatalf("a stream failed before the kill: %v", err)
		case <-timeout:
			t.Fatalf("only %d of %d streams delivered 10 events within 60s", len(cut), streams)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	wg.Wait()

	p2 := startDev(t, data)
	defer func() { _ = p2.cmd.Process.Kill(); _ = p2.cmd.Wait() }()
	cli := p2.audit(t)
	var last uint64
	for _, o := range cut {
		ev, err := cli.GetEvent(context.Background(), &auditv1.GetEventRequest{TenantId: tenant, RequestId: o.id})
		if err != nil {
			t.Fatalf("stream %s (%s), cut after 10 events, has no event after the restart: %v", o.id, o.endpoint, err)
		}
		e := ev.GetEvent()
		if e.GetStatus() != auditlog.StatusInterrupted || e.GetEndpoint() != o.endpoint || e.GetDay() != day {
			t.Errorf("stream %s: status %d, endpoint %s, day %s; want %d, %s, %s",
				o.id, e.GetStatus(), e.GetEndpoint(), e.GetDay(), auditlog.StatusInterrupted, o.endpoint, day)
		}
		last = max(last, e.GetSequence())
	}

	// A head signed after the restart covers them, verifies, and proves
	// each one included.
	ca, err := fleet.LoadCACert(filepath.Join(data, fleet.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	var after head.Head
	deadline := time.Now().Add(30 * time.Second)
	for after.LastSequence < last {
		if time.Now().After(deadline) {
			t.Fatalf("no head covering sequence %d after the restart (last: %+v)", last, after)
		}
		time.Sleep(20 * time.Millisecond)
		if resp, err := cli.GetHead(context.Background(), &auditv1.GetHeadRequest{TenantId: tenant, Day: day}); err == nil {
			after = auditservice.HeadFromProto(resp.GetHead())
		}
	}
	if err := head.Verify(after, ca); err != nil {
		t.Fatalf("head after the restart does not verify: %v", err)
	}
	for _, o := range cut {
		pr, err := cli.GetInclusionProof(context.Background(), &auditv1.GetInclusionProofRequest{
			TenantId: tenant, Day: day, RequestId: o.id, TreeSize: after.EventCount})
		if err != nil {
			t.Fatalf("inclusion proof of %s: %v", o.id, err)
		}
		h := auditservice.HeadFromProto(pr.GetHead())
		if err := head.Verify(h, ca); err != nil {
			t.Fatalf("head of the inclusion proof of %s: %v", o.id, err)
		}
		if err := head.VerifyInclusion(h, pr.GetLeaf(), pr.GetLeafIndex(), pr.GetHashes()); err != nil {
			t.Errorf("inclusion proof of %s: %v", o.id, err)
		}
	}
}
