package edge_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/limits"
)

// realLimits is a running limits.Limiter on the embedded etcd, on the
// edge's clock, with the client that reads its counters.
type realLimits struct {
	*limits.Limiter
	cli  *clientv3.Client
	stop func()
}

func startLimits(t *testing.T) *realLimits {
	t.Helper()
	cli := etcdtest.Client(t)
	l := limits.New(cli, limits.Config{GatewayID: "gw0", Now: func() time.Time { return fixedNow }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	rl := &realLimits{Limiter: l, cli: cli, stop: func() { cancel(); <-done }}
	t.Cleanup(rl.stop)
	return rl
}

// tpdCounter reads keyTPD's counter of the tokens granted today.
func (rl *realLimits) tpdCounter(t *testing.T) int64 {
	t.Helper()
	resp, err := rl.cli.Get(context.Background(), "/tollgate/limits/ten_test/key_tpd/tpd/"+fixedNow.Format(time.DateOnly))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A max_tokens so large that prompt + max_tokens overflows an int64 makes
// a reservation no day can hold: 429, however often it is sent, and the
// day's counter never goes past the key's TPD.
func TestChatHugeMaxTokensCannotPassTPD(t *testing.T) {
	rl := startLimits(t)
	s := newStack(t, stackConfig{limits: rl})
	const ask = `"messages":[{"role":"user","content":"hello there"}]`
	send := func(maxTokens string) response {
		t.Helper()
		r := s.post(t, "/v1/chat/completions", keyTPD, `{"model":"builtin/echo","max_tokens":`+maxTokens+`,`+ask+`}`)
		if c := rl.tpdCounter(t); c > tpdLimit {
			t.Fatalf("the day's counter is %d, above the key's TPD of %d", c, tpdLimit)
		}
		return r
	}
	// Use the day up with requests that fit.
	admitted := 0
	for {
		r := send("10")
		if r.status == http.StatusTooManyRequests {
			break
		}
		wantOK(t, r)
		if admitted++; admitted > tpdLimit {
			t.Fatalf("%d requests of at least one token each admitted under a TPD of %d", admitted, tpdLimit)
		}
	}
	if admitted == 0 {
		t.Fatal("no request was admitted; the test proves nothing")
	}
	for _, mt := range []string{"9223372036854775807", "9223372036854775800", strconv.Itoa(tpdLimit + 1)} {
		for range 5 {
			r := send(mt)
			wantError(t, r, http.StatusTooManyRequests, "rate_limited", "rate_limit_error", "")
			if r.header.Get("Retry-After") == "" {
				t.Errorf("max_tokens %s: 429 without Retry-After", mt)
			}
		}
	}
	rl.stop() // gives back what the gateway held: the counter is the usage
	if c := rl.tpdCounter(t); c < 1 || c > tpdLimit {
		t.Fatalf("the day's counter is %d after shutdown, want within (0, %d]", c, tpdLimit)
	}
}
