package perf_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// endpoint is where a client kind sends its requests.
type endpoint struct {
	base  string // e.g. http://127.0.0.1:PORT/v1
	grpc  string // the gRPC address, for the gRPC client kind
	key   string // bearer token; "" sends none
	model string
}

// requester sends one kind of client's requests to one endpoint. Each
// function may be called from many goroutines at once.
type requester struct {
	// plain sends a chat completion and reads the whole reply.
	plain func() error
	// streamed sends a streamed chat completion and reads the whole
	// stream; ttfb is the time from the send to the first byte of the
	// reply's body.
	streamed func() (ttfb time.Duration, err error)
	close    func()
}

// clientKind is one way a client reaches an endpoint: the OpenAI HTTP API
// (httpClient) or the gRPC InferenceService (grpcClient), each with its
// own columns in the table.
type clientKind struct {
	name string
	dial func(ep endpoint) (requester, error)
}

var httpClient = clientKind{name: "http", dial: dialHTTP}

// maxConns bounds the connections of an HTTP requester, and the requests
// an open loop has in flight.
const maxConns = 256

// requestTimeout bounds a request, so that a stuck target cannot hold a
// run for longer.
const requestTimeout = 10 * time.Second

// dialHTTP returns a requester over one http.Client whose pool keeps up
// to maxConns connections to the endpoint: one request at a time uses
// one connection, 32 at a time 32 of them. Only loopback endpoints are
// accepted.
func dialHTTP(ep endpoint) (requester, error) {
	u, err := url.Parse(ep.base)
	if err != nil {
		return requester{}, err
	}
	if u.Hostname() != "127.0.0.1" {
		return requester{}, fmt.Errorf("%s: the benchmark sends only to 127.0.0.1", ep.base)
	}
	tr := &http.Transport{MaxIdleConns: maxConns, MaxIdleConnsPerHost: maxConns, MaxConnsPerHost: maxConns, DisableCompression: true}
	hc := &http.Client{Transport: tr, Timeout: requestTimeout}
	plainBody, streamBody := []byte(chatRequest(ep.model, false)), []byte(chatRequest(ep.model, true))
	do := func(body []byte) (*http.Response, time.Time, error) {
		req, err := http.NewRequest(http.MethodPost, ep.base+"/chat/completions", bytes.NewReader(body))
		if err != nil {
			return nil, time.Time{}, err
		}
		if ep.key != "" {
			req.Header.Set("Authorization", "Bearer "+ep.key)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := hc.Do(req)
		return resp, start, err
	}
	want := []byte(chatWords)
	done := []byte("data: [DONE]\n\n")
	return requester{
		plain: func() error {
			resp, _, err := do(plainBody)
			if err != nil {
				return err
			}
			buf := bodyBuffers.Get().(*bytes.Buffer)
			defer bodyBuffers.Put(buf)
			buf.Reset()
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			return replyError(resp.StatusCode, buf.Bytes(), err, bytes.Contains(buf.Bytes(), want))
		},
		streamed: func() (time.Duration, error) {
			resp, start, err := do(streamBody)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			buf := bodyBuffers.Get().(*bytes.Buffer)
			defer bodyBuffers.Put(buf)
			buf.Reset()
			var first [512]byte
			n, err := resp.Body.Read(first[:])
			ttfb := time.Since(start)
			buf.Write(first[:n])
			if err == nil {
				_, err = buf.ReadFrom(resp.Body)
			} else if errors.Is(err, io.EOF) {
				err = nil
			}
			return ttfb, replyError(resp.StatusCode, buf.Bytes(), err, bytes.HasSuffix(buf.Bytes(), done))
		},
		close: tr.CloseIdleConnections,
	}, nil
}

func replyError(status int, body []byte, readErr error, whole bool) error {
	switch {
	case readErr != nil:
		return readErr
	case status != http.StatusOK:
		return fmt.Errorf("status %d: %.200s", status, body)
	case !whole:
		return fmt.Errorf("an incomplete reply: %.200s", body)
	}
	return nil
}

// clock is what the open loop reads and sleeps on; the tests give it a
// fake one.
type clock interface {
	now() time.Time
	sleepUntil(t time.Time)
}

// preciseClock sleeps with nanosleep. Go's own timers wake a process that
// is otherwise idle up to a millisecond late (the runtime's poller waits
// in whole milliseconds): an open loop that counts latency from the
// scheduled start would count that as the target's. Use it on a thread of
// its own with a small timer slack (onPreciseThread).
type preciseClock struct{}

func (preciseClock) now() time.Time { return time.Now() }

func (preciseClock) sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		_ = unix.Nanosleep(&ts, nil) // interrupted by a signal: sleep the rest
	}
}

// onPreciseThread runs f on an OS thread of its own with a timer slack of
// 1 ns (Linux's default, 50 µs, is added to every sleep). The thread ends
// with f.
func onPreciseThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		f()
	}()
	<-done
}

// openRun is what an open loop measured.
type openRun struct {
	lat []time.Duration // per request answered, from its scheduled start to the end of the reply
	// lag is, per request, how late the scheduler woke for it: the
	// sender's own imprecision, which is part of every latency. A
	// scheduler that was held back is not counted late for it.
	lag []time.Duration
	// heldBack counts the requests that found maxInFlight requests in
	// flight when they were due, and waited for one to end: a target
	// that cannot keep up with the rate.
	heldBack int
	errors   int
}

// openLoop schedules n requests, one every tick from the start, each on a
// goroutine of its own whatever the earlier ones do. At most maxInFlight
// run at once; past that the next waits for one to end. A request's
// latency is counted from the moment it was scheduled, not from when it
// was sent, so that whatever delays the sending (the sender, that bound)
// counts too, as it would for a client that does not wait.
func openLoop(clk clock, n int, tick time.Duration, maxInFlight int, send func() error) openRun {
	run := openRun{lat: make([]time.Duration, n), lag: make([]time.Duration, n)}
	var errs atomic.Int64
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := clk.now()
	free := start // when the scheduler was last free to send: after its last wait for a slot
	for i := range n {
		at := start.Add(time.Duration(i) * tick)
		clk.sleepUntil(at)
		run.lag[i] = clk.now().Sub(later(at, free))
		select {
		case slots <- struct{}{}:
		default:
			run.heldBack++
			slots <- struct{}{}
			free = clk.now()
		}
		wg.Go(func() {
			err := send()
			run.lat[i] = clk.now().Sub(at)
			if err != nil {
				run.lat[i] = failed
				errs.Add(1)
			}
			<-slots
		})
	}
	wg.Wait()
	run.errors = int(errs.Load())
	run.lat = slices.DeleteFunc(run.lat, func(d time.Duration) bool { return d == failed })
	return run
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// failed marks the latency of a request that failed.
const failed = time.Duration(math.MinInt64)

// closedLoop keeps conns requests in flight for d, each sender starting
// its next request when the last one ends, and returns the requests
// answered, the errors and the time taken.
func closedLoop(conns int, d time.Duration, send func() error) (ok, errs int, elapsed time.Duration) {
	var nOK, nErr atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if send() != nil {
					nErr.Add(1)
				} else {
					nOK.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(nOK.Load()), int(nErr.Load()), time.Since(start)
}

// sequential sends up to n requests one after the other, for at most d,
// and returns the latencies of those answered and the errors.
func sequential(n int, d time.Duration, send func() (time.Duration, error)) (lat []time.Duration, errs int) {
	lat = make([]time.Duration, 0, n)
	deadline := time.Now().Add(d)
	for range n {
		if time.Now().After(deadline) {
			break
		}
		l, err := send()
		if err != nil {
			errs++
			continue
		}
		lat = append(lat, l)
	}
	return lat, errs
}

// timed turns a plain request into one that returns its latency.
func timed(send func() error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		start := time.Now()
		err := send()
		return time.Since(start), err
	}
}

// fakeClock is a clock for the tests. It moves when told to and, with
// wakeLate, when a sleep ends: that much after the time slept until.
type fakeClock struct {
	mu       sync.Mutex
	t        time.Time
	wakeLate time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleepUntil(t time.Time) {
	if c.wakeLate == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if woke := t.Add(c.wakeLate); woke.After(c.t) {
		c.t = woke
	}
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestOpenLoopCountsFromScheduledStart(t *testing.T) {
	// Requests scheduled every 1 ms, each taking 3 ms, one at a time (the
	// clock moves only while they run): each starts later than scheduled
	// by 2 ms more than the one before, and that wait is part of its
	// latency.
	clk := &fakeClock{t: time.Unix(1000, 0)}
	n := 0
	run := openLoop(clk, 5, time.Millisecond, 1, func() error {
		clk.advance(3 * time.Millisecond)
		n++
		if n == 4 {
			return errors.New("refused")
		}
		return nil
	})
	ms := time.Millisecond
	// The fourth request failed: it has no latency, and counts as an error.
	if want := []time.Duration{3 * ms, 5 * ms, 7 * ms, 11 * ms}; !slices.Equal(run.lat, want) {
		t.Errorf("latencies = %v, want %v (from the scheduled start, not the send)", run.lat, want)
	}
	if run.errors != 1 {
		t.Errorf("errors = %d, want 1", run.errors)
	}
}

func TestOpenLoopLag(t *testing.T) {
	// The scheduler wakes 7 µs late for every request, and nothing else
	// moves the clock.
	clk := &fakeClock{t: time.Unix(1000, 0), wakeLate: 7 * time.Microsecond}
	run := openLoop(clk, 4, time.Millisecond, 4, func() error { return nil })
	for i, lag := range run.lag {
		if lag != 7*time.Microsecond {
			t.Errorf("request %d: lag %v, want 7µs", i, lag)
		}
	}
}

func TestOpenLoopBoundsInFlight(t *testing.T) {
	// Nothing ends until all have started: with a bound of 3, the fourth
	// request waits, and the scheduler with it, until one ends.
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var inFlight, most atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	go func() {
		for range 3 {
			<-started
		}
		close(release)
	}()
	run := openLoop(clk, 6, time.Millisecond, 3, func() error {
		now := inFlight.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		started <- struct{}{}
		<-release
		inFlight.Add(-1)
		return nil
	})
	if most.Load() != 3 {
		t.Errorf("at most %d in flight, want 3", most.Load())
	}
	if len(run.lat) != 6 || run.errors != 0 {
		t.Errorf("%d answered, %d errors; want 6, 0", len(run.lat), run.errors)
	}
}
