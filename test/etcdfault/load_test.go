package etcdfault_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one request the load generator sent and the answer it got.
// The gateway admitted it, if it did, between start and end.
type result struct {
	key, gw    int
	start, end time.Time
	status     int
	code       string // error.code of a refusal
	tokens     int64  // usage.total_tokens of a 200
}

// loadKey is one key the load generator sends requests under.
type loadKey struct {
	name, secret string
	body         []byte
	period       time.Duration // each worker sends at most one request per period
}

// load sends chat requests under each key to every gateway, one worker
// per key and gateway, and keeps every result. Violations of the answer's form are kept apart.
type load struct {
	client *http.Client
	keys   []loadKey
	bases  []string

	stop atomic.Bool
	wg   sync.WaitGroup

	mu       sync.Mutex
	results  []result
	problems []string
}

func newLoad(bases []string, keys []loadKey) *load {
	return &load{
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		keys:   keys, bases: bases,
	}
}

// run starts the workers; end stops them once their request in flight
// has its answer (never cancelled: a request whose answer is not seen
// might have been admitted, and could not be counted).
func (l *load) run() {
	for k := range l.keys {
		for g := range l.bases {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				tick := time.NewTicker(l.keys[k].period)
				defer tick.Stop()
				for !l.stop.Load() {
					l.send(k, g)
					<-tick.C
				}
			}()
		}
	}
}

func (l *load) end() {
	l.stop.Store(true)
	l.wg.Wait()
}

// send sends one request of key k to gateway g and records it.
func (l *load) send(k, g int) result {
	r := result{key: k, gw: g, start: time.Now()}
	req, _ := http.NewRequest(http.MethodPost, l.bases[g]+"/chat/completions", bytes.NewReader(l.keys[k].body))
	req.Header.Set("Authorization", "Bearer "+l.keys[k].secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	r.end = time.Now()
	if err != nil {
		// No answer: the gateways never stop in this test, so this is a
		// failure, and the request might have been admitted.
		l.problem("%s via gateway %d: no answer: %v", l.keys[k].name, g+1, err)
		r.status = -1
	} else {
		r.status = resp.StatusCode
		var perr error
		if r.status == http.StatusOK {
			r.tokens, perr = usage(body)
		} else {
			r.code, perr = refusal(r.status, resp.Header, body)
		}
		if perr != nil {
			l.problem("%s via gateway %d: %v", l.keys[k].name, g+1, perr)
		}
	}
	l.mu.Lock()
	l.results = append(l.results, r)
	l.mu.Unlock()
	return r
}

func (l *load) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) < 20 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// snapshot returns the results so far.
func (l *load) snapshot() []result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]result(nil), l.results...)
}

// usage reads a chat.completion's usage.total_tokens.
func usage(body []byte) (int64, error) {
	var c struct {
		Object string `json:"object"`
		Usage  *struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return 0, fmt.Errorf("200 whose body is not JSON (%w): %.200s", err, body)
	}
	if c.Object != "chat.completion" || c.Usage == nil || c.Usage.TotalTokens <= 0 {
		return 0, fmt.Errorf("200 that is not a chat.completion with usage: %.200s", body)
	}
	return c.Usage.TotalTokens, nil
}

// refusal checks a refusal: 429 rate_limited (with Retry-After) or 503
// limits_unavailable, in the error envelope (docs/gateway-api.md,
// "Errors"), and returns its code.
func refusal(status int, h http.Header, body []byte) (string, error) {
	var env struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return "", fmt.Errorf("%d whose body is not JSON (%w): %.200s", status, err, body)
	}
	if env.Error == nil {
		return "", fmt.Errorf("%d without the error envelope: %.200s", status, body)
	}
	e := env.Error
	if e.Message == "" || !strings.HasPrefix(e.RequestID, "req_") || e.RequestID != h.Get("x-request-id") {
		return e.Code, fmt.Errorf("%d envelope without a message or the request's id: %.200s", status, body)
	}
	switch {
	case status == http.StatusTooManyRequests && e.Code == "rate_limited" && e.Type == "rate_limit_error":
		if h.Get("Retry-After") == "" {
			return e.Code, fmt.Errorf("429 without Retry-After: %.200s", body)
		}
	case status == http.StatusServiceUnavailable && e.Code == "limits_unavailable" && e.Type == "server_error":
	default:
		return e.Code, fmt.Errorf("refused with %d %s/%s; want 429 rate_limited or 503 limits_unavailable: %.200s", status, e.Code, e.Type, body)
	}
	return e.Code, nil
}
