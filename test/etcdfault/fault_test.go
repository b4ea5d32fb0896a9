package etcdfault_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	svcKey = iota // a limit far above the load: every admission needs units granted by etcd
	rpmKey        // RPM 60, far below the load
	tpdKey        // a TPD the load uses up
)

func TestLimitsExactThroughEtcdFailures(t *testing.T) {
	const (
		rpm = 60
		tpd = 40_000
	)
	c := startCluster(t)
	gws := startGateways(t, 3, c.endpoints())
	var bases []string
	for _, g := range gws {
		bases = append(bases, g.base)
	}
	chat := func(text string, maxTokens int) []byte {
		return fmt.Appendf(nil, `{"model":"builtin/echo","max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, maxTokens, text)
	}
	words := strings.TrimSpace(strings.Repeat("tokens per day ", 7)) // 21 tokens
	keys := []loadKey{
		svcKey: {name: "svc", secret: createKey(t, gws, "svc", 1_000_000_000, 0), body: chat("hi", 8), period: 25 * time.Millisecond},
		rpmKey: {name: "rpm", secret: createKey(t, gws, "rpm", rpm, 0), body: chat("hi", 8), period: 25 * time.Millisecond},
		tpdKey: {name: "tpd", secret: createKey(t, gws, "tpd", 0, tpd), body: chat(words, 32), period: 100 * time.Millisecond},
	}
	l := newLoad(bases, keys)
	l.run()
	ended := false
	t.Cleanup(func() {
		if !ended {
			l.end()
		}
	})
	w := watcher{t: t, l: l, n: len(gws)}

	// Steady.
	t0 := time.Now()
	w.awaitServed("steady service", t0, 20, 30*time.Second)

	// The outage below spans the end of a UTC minute, so that the next
	// minute's budget is contested by three gateways coming back from it:
	// with less than 15 s of this minute left, wait (steady) for the next.
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 15*time.Second {
		w.awaitServed("steady service into the next minute", time.Now().Add(left), 1, left+30*time.Second)
	}

	// The leader hangs (SIGSTOP: its sockets stay open and answer
	// nothing, as a hung or cut-off machine's do): the two others elect
	// one and service goes on.
	old := c.leader()
	if old < 0 {
		t.Fatal("no leader")
	}
	tStopLeader := time.Now()
	c.pause(t, old)
	tElected := c.awaitQuorum(t, 30*time.Second)
	w.awaitServed("service with the leader hung", tElected, 20, 30*time.Second)
	// Until the client finds the hung member dead (its pings, about
	// 13 s), grants sent to it wait out their deadline and a gateway may
	// refuse with 503 meanwhile; then service is whole again.
	hungNormal := w.awaitNormal("normal service with the leader hung", tStopLeader, 2*time.Second, 45*time.Second)
	leaderLoss, leaderLossSpan := w.refusals(tStopLeader, time.Now()), w.refusalSpans(tStopLeader, time.Now())

	// A follower goes too: no quorum. Each gateway admits what it holds,
	// then refuses at once with 503.
	next := c.leader()
	follower := -1
	for i := range c.members {
		if i != old && i != next && c.running(i) {
			follower = i
		}
	}
	if next < 0 || follower < 0 {
		t.Fatalf("after the election: leader %d, follower %d", next, follower)
	}
	tKillFollower := time.Now()
	c.kill(t, follower)
	firstRefusal := w.awaitRefused("503 without quorum", tKillFollower, 30*time.Second)
	// Stay without quorum while each gateway refuses 40 more requests,
	// and into the next UTC minute: the held requests of the last one
	// are dropped, and nothing of the new one can be granted.
	nextMinute := tKillFollower.Truncate(time.Minute).Add(time.Minute)
	w.awaitRefusedN("the outage under load into the next minute", nextMinute.Add(500*time.Millisecond), 40, 90*time.Second)

	// The follower comes back: quorum again.
	tRestartFollower := time.Now()
	c.start(t, follower)
	tQuorum := c.awaitQuorum(t, 30*time.Second)
	firstOK := w.awaitServed("the first 200 after quorum", tRestartFollower, 1, 30*time.Second)
	normal := w.awaitNormal("normal service after quorum", tKillFollower, 2*time.Second, 30*time.Second)

	// The old leader wakes (SIGCONT), steps down and catches up; service
	// is not disturbed.
	tResumeLeader := time.Now()
	c.resume(t, old)
	c.awaitMember(t, old, 30*time.Second)
	tRejoined := time.Now()
	w.awaitServed("steady service with three members", tRejoined, 20, 30*time.Second)
	if n := w.refusals(tResumeLeader, time.Now()); n[svcKey] != 0 {
		t.Errorf("%d refusals of the unconstrained key while the old leader woke in a cluster with quorum", n[svcKey])
	}
	l.end()
	ended = true

	// Use up the day: every gateway sends the TPD key's requests until
	// it is refused for the budget. A 503 is not the budget: the cluster
	// that just took its old leader back may miss a grant's deadline
	// (seen on a loaded machine), and the gateway refuses rather than
	// guess; the loop retries it after a pause, as a client would, a
	// bounded number of times.
	var wg sync.WaitGroup
	for g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, unavailable := 0, 0; i < 5000; i++ {
				switch r := l.send(tpdKey, g); {
				case r.status == http.StatusOK:
				case r.status == http.StatusServiceUnavailable && unavailable < 100:
					unavailable++
					time.Sleep(100 * time.Millisecond)
				default:
					return
				}
			}
		}()
	}
	wg.Wait()

	for _, p := range l.problems {
		t.Error(p)
	}
	results := l.snapshot()
	checkExact(t, results, rpm, tpd)

	// The figures.
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	t.Logf("requests: %d in %v", len(results), time.Since(t0).Round(time.Second))
	t.Logf("leader stopped: new leader and quorum seen after %s; refusals meanwhile (svc/rpm/tpd 503s): %v; first to last 503 of svc by gateway: %v",
		ms(tElected.Sub(tStopLeader)), leaderLoss, leaderLossSpan)
	for g := range gws {
		if !hungNormal[g].IsZero() {
			t.Logf("gateway %d: last 503 with the leader hung %s after it stopped", g+1, ms(hungNormal[g].Sub(tStopLeader)))
		}
	}
	t.Logf("no quorum for %s; quorum seen %s after the follower's restart; the old leader served reads %s after SIGCONT",
		ms(tRestartFollower.Sub(tKillFollower)), ms(tQuorum.Sub(tRestartFollower)), ms(tRejoined.Sub(tResumeLeader)))
	for g := range gws {
		// Times after the follower's restart: the test sees quorum only
		// through its own probes, so a gateway may beat it.
		t.Logf("gateway %d: first 503 %s after the follower's kill; after its restart, first 200 at %s, last 503 at %s",
			g+1, ms(firstRefusal[g].Sub(tKillFollower)), ms(firstOK[g].Sub(tRestartFollower)), ms(normal[g].Sub(tRestartFollower)))
	}
}

// checkExact holds the admissions to the limits: the RPM key's 200s in
// each UTC minute, the TPD key's charged tokens in each UTC day.
func checkExact(t *testing.T, results []result, rpm, tpd int64) {
	t.Helper()
	var minutes, days []admitted
	perMinute := map[int64]int{}
	var charged int64
	var rpmLimited, tpdLimited, svcLimited int
	for _, r := range results {
		switch {
		case r.key == rpmKey && r.status == http.StatusOK:
			minutes = append(minutes, admitted{r.start.Unix() / 60, r.end.Unix() / 60, 1})
			perMinute[r.end.Unix()/60]++
		case r.key == tpdKey && r.status == http.StatusOK:
			days = append(days, admitted{r.start.Unix() / 86400, r.end.Unix() / 86400, r.tokens})
			charged += r.tokens
		case r.code == "rate_limited":
			switch r.key {
			case rpmKey:
				rpmLimited++
			case tpdKey:
				tpdLimited++
			default:
				svcLimited++
			}
		}
	}
	if w, over := overAdmitted(minutes, rpm); over {
		t.Errorf("the RPM key was admitted past %d in the minute of %s: %v", rpm, time.Unix(w*60, 0).UTC().Format(time.TimeOnly), perMinute)
	}
	if w, over := overAdmitted(days, tpd); over {
		t.Errorf("the TPD key was charged past %d on %s: %d tokens", tpd, time.Unix(w*86400, 0).UTC().Format(time.DateOnly), charged)
	}
	// The limits were reached, or the checks above prove nothing.
	if rpmLimited == 0 || tpdLimited == 0 {
		t.Errorf("429 rate_limited: %d for the RPM key, %d for the TPD key; want both refused for their budget", rpmLimited, tpdLimited)
	}
	if svcLimited != 0 {
		t.Errorf("%d 429s for a key whose limit the load never reaches", svcLimited)
	}
	t.Logf("RPM key (%d): admitted by minute of the answer %v; TPD key (%d): %d tokens charged", rpm, perMinute, tpd, charged)
}

// watcher waits for what the load's results show.
type watcher struct {
	t *testing.T
	l *load
	n int // gateways
}

// perGateway polls until each gateway has a result of the svc key
// started at or after since that match says is the one, and returns the
// end of that result on each.
func (w watcher) perGateway(what string, since time.Time, within time.Duration, match func(g int, rs []result) (time.Time, bool)) []time.Time {
	w.t.Helper()
	at := make([]time.Time, w.n)
	poll(w.t, what, within, func() bool {
		mine := make([][]result, w.n)
		for _, r := range w.l.snapshot() {
			if r.key == svcKey && !r.start.Before(since) {
				mine[r.gw] = append(mine[r.gw], r)
			}
		}
		for g := range w.n {
			var ok bool
			if at[g], ok = match(g, mine[g]); !ok {
				return false
			}
		}
		return true
	})
	return at
}

// nth returns a matcher of the nth result of the given status.
func nth(n int, status int) func(int, []result) (time.Time, bool) {
	return func(_ int, rs []result) (time.Time, bool) {
		seen := 0
		for _, r := range rs {
			if r.status == status {
				if seen++; seen == n {
					return r.end, true
				}
			}
		}
		return time.Time{}, false
	}
}

// awaitServed waits until every gateway has served n requests of the svc
// key sent since, and returns when each served its first.
func (w watcher) awaitServed(what string, since time.Time, n int, within time.Duration) []time.Time {
	w.t.Helper()
	w.perGateway(what, since, within, nth(n, http.StatusOK))
	return w.perGateway(what, since, within, nth(1, http.StatusOK))
}

// awaitRefused waits until every gateway has refused a request of the svc
// key sent since with 503, and returns when each did first.
func (w watcher) awaitRefused(what string, since time.Time, within time.Duration) []time.Time {
	w.t.Helper()
	return w.perGateway(what, since, within, nth(1, http.StatusServiceUnavailable))
}

// awaitRefusedN waits until every gateway has refused n requests of the
// svc key sent since with 503.
func (w watcher) awaitRefusedN(what string, since time.Time, n int, within time.Duration) {
	w.t.Helper()
	w.perGateway(what, since, within, nth(n, http.StatusServiceUnavailable))
}

// awaitNormal waits until every gateway has answered only 200 to the svc
// key for hold after its last refusal of a request sent since, and
// returns the end of that last refusal on each.
func (w watcher) awaitNormal(what string, since time.Time, hold, within time.Duration) []time.Time {
	w.t.Helper()
	return w.perGateway(what, since, within, func(_ int, rs []result) (time.Time, bool) {
		var last time.Time
		for _, r := range rs {
			if r.status != http.StatusOK && r.end.After(last) {
				last = r.end
			}
		}
		served := 0
		for _, r := range rs {
			if r.status == http.StatusOK && r.start.After(last) {
				served++
			}
		}
		return last, served > 0 && time.Since(last) >= hold
	})
}

// refusalSpans returns, for each gateway, the time from the start of the
// first 503 of the svc key to the end of the last among requests sent
// between from and to (0 if none).
func (w watcher) refusalSpans(from, to time.Time) []time.Duration {
	first, last := make([]time.Time, w.n), make([]time.Time, w.n)
	for _, r := range w.l.snapshot() {
		if r.key != svcKey || r.status != http.StatusServiceUnavailable || r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		if first[r.gw].IsZero() || r.start.Before(first[r.gw]) {
			first[r.gw] = r.start
		}
		if r.end.After(last[r.gw]) {
			last[r.gw] = r.end
		}
	}
	spans := make([]time.Duration, w.n)
	for g := range spans {
		spans[g] = last[g].Sub(first[g]).Round(time.Millisecond)
	}
	return spans
}

// refusals counts the 503s of each key among requests sent between from
// and to.
func (w watcher) refusals(from, to time.Time) [3]int {
	var n [3]int
	for _, r := range w.l.snapshot() {
		if r.status == http.StatusServiceUnavailable && !r.start.Before(from) && r.start.Before(to) {
			n[r.key]++
		}
	}
	return n
}
