package pipeline_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// streamOver serves the pipeline, recording into l, over gRPC and starts
// one streamed chat; it returns the stream and its count of messages.
func streamOver(t *testing.T, l *auditlog.Log) (int, error) {
	t.Helper()
	return streamOverNotify(t, l, nil)
}

// streamOverNotify is streamOver, closing first (when not nil) once the
// first message arrived.
func streamOverNotify(t *testing.T, l *auditlog.Log, first chan<- struct{}) (int, error) {
	t.Helper()
	engines, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(engines)
	p := pipeline.New(pipeline.Config{Inference: local, Audit: l, Receipts: l,
		Auth: oneKey{keys.NewPrincipal("acme", "key_test", "test", true, nil, 0, 0, nil, time.Time{})}})
	cli := serveService(t, p, 4)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tgk_test")
	stream, err := cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel,
		Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "one two three"}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		if n == 0 && first != nil {
			close(first)
		}
		n++
	}
}

// TestStreamStartIsRecordedFirst: a stream whose start cannot be recorded
// sends nothing and ends INTERNAL; one that finishes is recorded once,
// and its start is spent: reopening the log records nothing more.
func TestStreamStartIsRecordedFirst(t *testing.T) {
	dir := t.TempDir()
	l, err := auditlog.Open(dir, auditlog.Options{ApplianceID: "app_grpc"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := streamOver(t, l)
	if err != nil || n < 3 {
		t.Fatalf("stream: %d messages, %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = auditlog.Open(dir, auditlog.Options{ApplianceID: "app_grpc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Stats().Events; got != 0 {
		t.Errorf("reopen recorded %d events for a stream that finished", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = streamOver(t, l) // closed: neither a start nor an event can be recorded
	if status.Code(err) != codes.Internal || n != 0 {
		t.Errorf("stream on a log that cannot record its start: %d messages, %v; want none, INTERNAL", n, err)
	}
}

// TestStreamWaitsForItsStartSync: the stream's start syncs while the
// engine is asked (BeginStart), and nothing of the stream reaches the
// client until that sync returned. The sync is held; a message arriving
// meanwhile fails the test (the wait for one only bounds how long a wrong
// order has to show: it cannot fail a right one). Released, the stream
// runs to its end and its start is spent.
func TestStreamWaitsForItsStartSync(t *testing.T) {
	dir := t.TempDir()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	opts := auditlog.Options{ApplianceID: "app_grpc", SyncStarts: func(f *os.File) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return f.Sync()
	}}
	l, err := auditlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	first := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		n, err := streamOverNotify(t, l, first)
		done <- result{n, err}
	}()
	<-entered
	select {
	case <-first:
		t.Fatal("a message of the stream arrived while its start's sync was held")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	r := <-done
	if r.err != nil || r.n < 3 {
		t.Fatalf("stream: %d messages, %v", r.n, r.err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.SyncStarts = nil
	if l, err = auditlog.Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if got := l.Stats().Events; got != 0 {
		t.Errorf("reopen recorded %d events for a stream that finished", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
