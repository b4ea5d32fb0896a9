package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
)

// streamingDev runs dev in data with --shutdown-grace grace, starts a
// streamed chat of pieces (a /delay request of the built-in model) and
// reads its first line. stop stops dev; the rest of the stream is then
// read from the returned reader, and done gives dev's exit status.
func streamingDev(t *testing.T, data, grace, pieces string) (br *bufio.Reader, stop func(), done <-chan int, errOut *notifyBuffer) {
	t.Helper()
	o := newOutputs()
	out := o.buffer()
	errOut = o.buffer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0",
			"--central-addr", "127.0.0.1:0", "--shutdown-grace", grace}, out, errOut)
	}()
	var m []string
	rx := regexp.MustCompile(`Base URL:  (\S+)(?s:.*)Demo key:  (tgk_\S+)`)
	o.waitFor(t, "dev's banner", func() bool {
		select {
		case code := <-exited:
			t.Fatalf("dev exited %d: %s", code, errOut.String())
		default:
		}
		m = rx.FindStringSubmatch(out.String())
		return m != nil
	})
	body := `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"` + pieces + `"}]}`
	req, err := http.NewRequest(http.MethodPost, m[1]+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+m[2])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br = bufio.NewReader(resp.Body)
	if first, err := br.ReadString('\n'); err != nil || !strings.Contains(first, `"role":"assistant"`) {
		t.Fatalf("status %d, first line %q (%v)", resp.StatusCode, first, err)
	}
	return br, cancel, exited, errOut
}

// A stream still running when dev is stopped with --shutdown-grace 0 ends
// with one service_unavailable error event and no [DONE]; dev logs the
// shutdown and exits 0, its event under a signed head.
func TestDevShutdownEndsStreams(t *testing.T) {
	data := t.TempDir()
	// Fifty pieces 200ms apart: the stream is still running when dev
	// stops, whenever that is.
	br, stop, done, errOut := streamingDev(t, data, "0", "/delay 200"+strings.Repeat(" word", 50))
	stop()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the stream was cut: %v", err)
	}
	frames := strings.Split(strings.TrimSpace(string(rest)), "\n\n")
	last := frames[len(frames)-1]
	if !strings.HasPrefix(last, `data: {"error":{"code":"service_unavailable"`) || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("the stream ended with %q", rest)
	}
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), `msg="shutting down" grace=0s in_flight=1`) {
		t.Errorf("the shutdown was not logged:\n%s", errOut.String())
	}
	checkAllSigned(t, data)
}

// A stream that finishes during the grace is recorded, and its event is
// covered by a head signed before dev exits: head signing stops only once
// the requests have drained.
func TestDevShutdownSignsTheGrace(t *testing.T) {
	data := t.TempDir()
	br, stop, done, errOut := streamingDev(t, data, "1m", "/delay 100"+strings.Repeat(" word", 5))
	stop() // the stream goes on within the grace
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream during the grace: %q (%v)", rest, err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d: %s", code, errOut.String())
	}
	checkAllSigned(t, data)
}

// checkAllSigned reopens dev's audit log in data, after dev exited, and
// fails if a tree grew after the last head dev signed.
func checkAllSigned(t *testing.T, data string) {
	t.Helper()
	id, err := devApplianceID(data)
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := fleet.EnsureDev(data, id)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(filepath.Join(data, "audit"), auditlog.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	heads, err := l.SignHeads(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) > 0 {
		t.Errorf("%d tree(s) grew after the last head signed before dev exited: %+v", len(heads), heads[0])
	}
}
