package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

const limitedKey = "tgk_test_acme_limited" // rpm 30, tpd 100000

// Three gateways on one etcd, hammered through HTTP by the official SDK:
// exactly the key's RPM is admitted in the minute, the rest get 429
// rate_limited with Retry-After and the x-ratelimit headers. Each worker
// sends until its gateway refuses it: a gateway whose demand ended while
// it held a slice would strand those units until its idle sweep gives
// them back (docs/limits.md, "Under-admission"), and the other gateways'
// requests meanwhile would be refused; a gateway that has refused holds
// nothing and can get nothing more.
func TestRPMAcrossThreeGatewaysOverHTTP(t *testing.T) {
	startInOneMinute(t)
	prefix := etcdtest.Prefix(t)
	var bases []string
	for range 3 {
		bases = append(bases, startStackOn(t, etcdtest.ClientAt(t, etcdtest.Endpoints(t), prefix)).base)
	}
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client(bases[w%3], limitedKey)
			refused := false
			for i := 0; !refused; i++ {
				if i == 40 {
					t.Errorf("worker %d never refused in 40 requests", w)
					return
				}
				var resp *http.Response
				_, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model: "builtin/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				}, option.WithResponseInto(&resp))
				var apiErr *openai.Error
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests && apiErr.Code == "rate_limited":
					limited.Add(1)
					refused = true
					h := apiErr.Response.Header
					if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra < 1 || ra > 60 {
						t.Errorf("Retry-After %q", h.Get("Retry-After"))
					}
					if h.Get("x-ratelimit-limit-requests") != "30" || h.Get("x-ratelimit-remaining-requests") != "0" || h.Get("x-ratelimit-reset-requests") == "" {
						t.Errorf("429 headers %v", h)
					}
				default:
					t.Errorf("request: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 30 || limited.Load() != 12 {
		t.Fatalf("admitted %d, limited %d; want exactly 30 admitted, and each of the 12 workers refused once", ok.Load(), limited.Load())
	}
}

// Every response of a limited key carries the six headers, and the
// remaining requests go down as requests are admitted.
func TestRateLimitHeaders(t *testing.T) {
	startInOneMinute(t)
	s := startStack(t)
	cl := client(s.base, limitedKey)
	last := 31
	for range 3 {
		var resp *http.Response
		if _, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "builtin/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}, option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"limit-requests", "remaining-requests", "reset-requests", "limit-tokens", "remaining-tokens", "reset-tokens"} {
			if resp.Header.Get("x-ratelimit-"+h) == "" {
				t.Fatalf("missing x-ratelimit-%s in %v", h, resp.Header)
			}
		}
		rem, _ := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-requests"))
		if rem >= last {
			t.Fatalf("remaining %d did not go down from %d", rem, last)
		}
		last = rem
	}
	// A bad request of a limited key carries them too, and costs nothing.
	_, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "nonamespace", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("want 400: %v", err)
	}
	if got, _ := strconv.Atoi(apiErr.Response.Header.Get("x-ratelimit-remaining-requests")); got != last {
		t.Fatalf("400 shows remaining %d, want %d (not charged)", got, last)
	}
	// Other endpoints carry them too.
	var resp *http.Response
	if _, err := cl.Models.List(context.Background(), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-requests")); got != last-1 {
		t.Fatalf("models listing: remaining %d, want %d", got, last-1)
	}
}

// startInOneMinute waits, when less than 15 s of the wall clock's minute
// are left, for the next one: RPM windows are clock minutes, and a test
// counting one window's admissions must not straddle two.
func startInOneMinute(t *testing.T) {
	t.Helper()
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 15*time.Second {
		time.Sleep(left)
	}
}
