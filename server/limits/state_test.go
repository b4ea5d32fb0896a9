package limits

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestSetHeaders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state State
		want  map[string]string
	}{
		{"no limits", State{}, map[string]string{}},
		{"rpm only", State{LimitRequests: 60, RemainingRequests: 59, ResetRequests: 1500 * time.Millisecond}, map[string]string{
			"X-Ratelimit-Limit-Requests": "60", "X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "2s",
		}},
		{"tpd only", State{LimitTokens: 1000, RemainingTokens: 0, ResetTokens: 6 * time.Minute}, map[string]string{
			"X-Ratelimit-Limit-Tokens": "1000", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6m0s",
		}},
		{"both", State{LimitRequests: 5, RemainingRequests: 4, ResetRequests: time.Nanosecond, LimitTokens: 9, RemainingTokens: 8, ResetTokens: 23*time.Hour + time.Millisecond}, map[string]string{
			"X-Ratelimit-Limit-Requests": "5", "X-Ratelimit-Remaining-Requests": "4", "X-Ratelimit-Reset-Requests": "1s",
			"X-Ratelimit-Limit-Tokens": "9", "X-Ratelimit-Remaining-Tokens": "8", "X-Ratelimit-Reset-Tokens": "23h0m1s",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			tc.state.SetHeaders(h)
			if len(h) != len(tc.want) {
				t.Fatalf("headers %v, want %v", h, tc.want)
			}
			for k, v := range tc.want {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}

func TestDeniedRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{0, "0"},
		{time.Millisecond, "1"},
		{59 * time.Second, "59"},
		{59*time.Second + time.Nanosecond, "60"},
		{13 * time.Hour, "46800"},
	} {
		h := http.Header{}
		(&Denied{Reason: ReasonTPD, RetryAfter: tc.after, State: State{LimitTokens: 1}}).SetHeaders(h)
		if got := h.Get("Retry-After"); got != tc.want {
			t.Errorf("RetryAfter %v: header %q, want %q", tc.after, got, tc.want)
		}
	}
}

func TestWindow(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		k          kind
		at         time.Time
		start, end time.Time
		name       string
	}{
		{rpm, time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC), time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC), "1795428000"},
		{rpm, time.Date(2026, 11, 23, 10, 0, 59, 999999999, time.UTC), time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC), "1795428000"},
		{rpm, time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 2, 0, 0, time.UTC), "1795428060"},
		{tpd, time.Date(2026, 11, 23, 23, 59, 59, 0, time.UTC), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), "2026-11-23"},
		// 00:30 in CET is still the previous UTC day.
		{tpd, time.Date(2026, 11, 24, 0, 30, 0, 0, cet), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), "2026-11-23"},
	} {
		start, end, name := window(tc.k, tc.at)
		if !start.Equal(tc.start) || !end.Equal(tc.end) || name != tc.name {
			t.Errorf("window(%v, %v) = %v, %v, %q; want %v, %v, %q", tc.k, tc.at, start, end, name, tc.start, tc.end, tc.name)
		}
	}
}

func TestSliceSize(t *testing.T) {
	l := New(nil, Config{})
	now := time.Date(2026, 11, 23, 10, 0, 5, 500_000_000, time.UTC)
	for _, tc := range []struct {
		name         string
		k            kind
		prev, cur    int64 // admissions in the previous and current second
		waiting      int64
		limit, taken int64
		least        int64
		want         int64
	}{
		{"no traffic yet", rpm, 0, 0, 0, 1000, 0, 1, 1},
		{"rate over the horizon", rpm, 100, 50, 0, 100_000, 0, 1, 200}, // (100·½ + 50)/s × 2s
		{"waiting requests", rpm, 0, 0, 9, 1000, 0, 1, 9},
		{"capped by a fair share", rpm, 1000, 1000, 0, 1000, 200, 1, 200},
		{"shrinks to one", rpm, 1000, 1000, 0, 1000, 998, 1, 1},
		{"at least what the request lacks", tpd, 0, 10, 0, 1_000_000, 0, 5000, 5000},
		{"tokens at their rate", tpd, 0, 3000, 0, 1_000_000, 0, 100, 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bucket{kind: tc.k, waiting: tc.waiting, ref: counterRef{val: tc.taken},
				rate: rateMeter{sec: now.Unix(), prev: tc.prev, cur: tc.cur}}
			if got := l.sliceSize(b, tc.limit, tc.least, now); got != tc.want {
				t.Fatalf("sliceSize = %d, want %d", got, tc.want)
			}
		})
	}
}

// The headers cost one allocation beyond their values: the names are
// canonical already and the values share one array.
func TestSetHeadersAllocations(t *testing.T) {
	st := State{LimitRequests: 600, RemainingRequests: 599, ResetRequests: time.Minute,
		LimitTokens: 100000, RemainingTokens: 99000, ResetTokens: 6 * time.Hour}
	h := http.Header{}
	values := testing.AllocsPerRun(100, func() {
		_, _, _ = strconv.FormatInt(st.LimitRequests, 10), strconv.FormatInt(st.RemainingRequests, 10), formatReset(st.ResetRequests)
		_, _, _ = strconv.FormatInt(st.LimitTokens, 10), strconv.FormatInt(st.RemainingTokens, 10), formatReset(st.ResetTokens)
	})
	headers := testing.AllocsPerRun(100, func() { st.SetHeaders(h) })
	if headers != values+1 {
		t.Fatalf("SetHeaders: %v allocations, its values alone %v", headers, values)
	}
}
