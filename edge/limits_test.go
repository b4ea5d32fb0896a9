package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/pipeline"
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

// A reservation the day cannot hold (here the default one, max_tokens
// unset) says to lower max_tokens, naming the numbers, and tells the SDKs
// not to retry: the day's reset is hours away.
func TestTPDRefusalSaysLowerMaxTokens(t *testing.T) {
	s := newStack(t, stackConfig{limits: startLimits(t)})
	const ask = `"messages":[{"role":"user","content":"hello there"}]`
	for _, tc := range []struct{ name, body, want string }{
		{"max_tokens unset", `{"model":"builtin/echo",` + ask + `}`, "max_tokens unset, so the default reservation of 4096"},
		{"max_tokens too large", `{"model":"builtin/echo","max_tokens":60,` + ask + `}`, "plus max_tokens 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, chatPath, keyTPD, tc.body)
			e := wantError(t, r, http.StatusTooManyRequests, "rate_limited", "rate_limit_error", "")
			msg, _ := e["message"].(string)
			for _, want := range []string{tc.want, "50 tokens per day has 50 tokens left today", "set max_tokens to at most "} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			if got := r.header.Get("x-should-retry"); got != "false" {
				t.Errorf("x-should-retry %q, want false", got)
			}
		})
	}
	// An admitted request is not told anything about retries.
	r := s.post(t, chatPath, keyTPD, `{"model":"builtin/echo","max_tokens":1,`+ask+`}`)
	wantOK(t, r)
	if r.header.Get("x-should-retry") != "" {
		t.Errorf("an admitted request has x-should-retry %q", r.header.Get("x-should-retry"))
	}
}

// A reply without max_tokens, for a key with a TPD limit, is capped at
// what it reserved (DefaultCompletionReserve): it can never be charged
// more than was admitted. Without a TPD limit nothing is reserved and
// nothing is capped.
func TestReplyCappedAtItsReservation(t *testing.T) {
	s := newStack(t, stackConfig{limits: startLimits(t)})
	long := strings.TrimSpace(strings.Repeat("word ", pipeline.DefaultCompletionReserve+100))
	body := `{"model":"builtin/echo","messages":[{"role":"user","content":"` + long + `"}]}`
	for _, tc := range []struct {
		key        string
		completion int64
		finish     string
	}{
		{keyDay, pipeline.DefaultCompletionReserve, "length"},
		{keyAll, pipeline.DefaultCompletionReserve + 100, "stop"},
	} {
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(wantOK(t, s.post(t, chatPath, tc.key, body)), &out); err != nil {
			t.Fatal(err)
		}
		if out.Usage.CompletionTokens != tc.completion || len(out.Choices) != 1 || out.Choices[0].FinishReason != tc.finish {
			t.Errorf("%s: %d completion tokens, %+v; want %d, %s", tc.key, out.Usage.CompletionTokens, out.Choices, tc.completion, tc.finish)
		}
	}
}

// Past MaxInFlight a request is 503 service_unavailable with Retry-After,
// before its key is checked; /healthz still answers; a freed slot serves
// again.
func TestMaxInFlight(t *testing.T) {
	m := edge.NewMetrics(prometheus.NewRegistry())
	s := newStack(t, stackConfig{maxInFlight: 1, metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := s.newRequest(t, http.MethodPost, chatPath, keyAll,
		`{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"/delay 100 `+strings.Repeat("w ", 600)+`"}]}`).WithContext(ctx)
	resp, err := s.client.Do(held) // its headers come with the first piece: the slot is held
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("held stream: %d", resp.StatusCode)
	}
	r := s.post(t, chatPath, keyAll, `{"model":"builtin/echo",`+hi+`}`)
	wantError(t, r, http.StatusServiceUnavailable, "service_unavailable", "server_error", "")
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if inFlight, busy := testutil.ToFloat64(m.InFlight), testutil.ToFloat64(m.Busy); inFlight != 1 || busy != 1 {
		t.Errorf("in flight %v, busy refusals %v; want 1 and 1", inFlight, busy)
	}
	if h := s.do(t, http.MethodGet, "/healthz", "", ""); h.status != http.StatusOK {
		t.Errorf("healthz while full: %d %s", h.status, h.body)
	}
	cancel() // the held stream ends; its slot is freed once its handler returns
	for i := 0; ; i++ {
		r := s.post(t, chatPath, keyAll, `{"model":"builtin/echo",`+hi+`}`)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable || i == 1000 {
			t.Fatalf("after the stream ended: %d %s", r.status, r.body)
		}
		time.Sleep(time.Millisecond)
	}
}

// A reply whose audit event cannot be recorded is not sent (500 instead),
// and what the engine spent on it is not charged: the client is charged
// what it is told, here nothing.
func TestUnrecordedReplyIsNotCharged(t *testing.T) {
	rl := startLimits(t)
	audit := newAuditRecorder()
	audit.fail = errors.New("injected: the audit log failed")
	s := newStack(t, stackConfig{limits: rl, audit: audit})
	for _, tc := range []struct{ path, body string }{
		{chatPath, `{"model":"builtin/echo","max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`},
		{embedPath, `{"model":"builtin/embed","input":"hello there"}`},
	} {
		wantError(t, s.post(t, tc.path, keyTPD, tc.body), http.StatusInternalServerError, "internal_error", "server_error", "")
		if ev := audit.next(t); ev.Status != http.StatusOK {
			t.Fatalf("%s: the append was of status %d, want the 200 reply it failed to record", tc.path, ev.Status)
		}
	}
	rl.stop() // gives back what the gateway held: the counter is the usage
	if c := rl.tpdCounter(t); c != 0 {
		t.Fatalf("the day's counter is %d after two replies never sent, want 0", c)
	}
}

// A completion of several prompts reserves every prompt and a max_tokens
// for each against the TPD, in one admission: a request whose prompts and
// max_tokens add up to the day's tokens exactly is admitted, one a token
// over (or one prompt more) is not, and the day is charged what the
// prompts used.
func TestCompletionPromptsReservedTogether(t *testing.T) {
	rl := startLimits(t)
	s := newStack(t, stackConfig{limits: rl})
	// Each prompt is 3 tokens: n prompts with max_tokens m reserve n*(3+m).
	send := func(n, maxTokens int) response {
		t.Helper()
		prompts := strings.TrimSuffix(strings.Repeat(`"one two three",`, n), ",")
		return s.post(t, completionsPath, keyTPD, `{"model":"builtin/echo","max_tokens":`+strconv.Itoa(maxTokens)+`,"prompt":[`+prompts+`]}`)
	}
	// 3*(3+22) = 75 and 2*(3+23) = 52 are over the day's 50.
	for _, tc := range []struct{ n, maxTokens int }{{3, 22}, {2, 23}} {
		r := send(tc.n, tc.maxTokens)
		e := wantError(t, r, http.StatusTooManyRequests, "rate_limited", "rate_limit_error", "")
		msg, _ := e["message"].(string)
		want := "this request of " + strconv.Itoa(tc.n) + " prompts reserves " + strconv.Itoa(tc.n*(3+tc.maxTokens))
		if !strings.Contains(msg, want) || !strings.Contains(msg, "set max_tokens to at most "+strconv.Itoa((tpdLimit-3*tc.n)/tc.n)) {
			t.Errorf("%d prompts, max_tokens %d: message %q lacks %q and what would fit", tc.n, tc.maxTokens, msg, want)
		}
		if c := rl.tpdCounter(t); c != 0 {
			t.Fatalf("a refused request left the day's counter at %d", c)
		}
	}
	// 2*(3+22) = 50: exactly the day.
	wantOK(t, send(2, 22))
	rl.stop() // gives back what the gateway held: the counter is the usage
	if c := rl.tpdCounter(t); c != 2*(3+3) {
		t.Fatalf("the day's counter is %d, want the %d tokens the two prompts used", c, 2*(3+3))
	}
}
