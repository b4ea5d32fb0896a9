package portal

import (
	"sync"
	"time"
)

// Sign-in throttling: an account accepts at most throttleFailures
// password checks in a row that do not succeed; after that, none until
// throttleLock after the last one. An attempt is counted when its check
// starts, not when it fails, so that parallel attempts cannot all pass
// before the first failure is recorded; a success clears the count. The
// state is per portal process.
const (
	throttleFailures = 5
	throttleLock     = time.Minute
	// throttleMaxEntries bounds the accounts tracked; when full, the one
	// whose last attempt is oldest is forgotten.
	throttleMaxEntries = 10_000
)

type failures struct {
	count int
	last  time.Time
}

// throttle counts unsuccessful password checks per tenant and user,
// whether or not the account exists, so that it tells nobody which do.
type throttle struct {
	mu      sync.Mutex
	entries map[string]failures
}

func newThrottle() *throttle { return &throttle{entries: make(map[string]failures)} }

func throttleKey(tenant, user string) string { return tenant + "\x00" + user }

// attempt reports whether a password check of the account may start at
// now, and if so counts it as a failure until succeeded says otherwise.
func (t *throttle) attempt(tenant, user string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := throttleKey(tenant, user)
	f, ok := t.entries[k]
	if ok && f.count >= throttleFailures && now.Before(f.last.Add(throttleLock)) {
		return false
	}
	if !ok && len(t.entries) >= throttleMaxEntries {
		evictOldest(t.entries, func(v failures) time.Time { return v.last })
	}
	if f.count >= throttleFailures {
		f.count = throttleFailures - 1 // the lock is over: one more try
	}
	t.entries[k] = failures{count: f.count + 1, last: now}
	return true
}

// succeeded clears the account's count.
func (t *throttle) succeeded(tenant, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, throttleKey(tenant, user))
}

// undo takes back an attempt counted for the account whose password was
// not checked after all (no check slot came free, or the account had
// changed), so that waiting for a busy portal never locks anyone out.
func (t *throttle) undo(tenant, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := throttleKey(tenant, user)
	switch f, ok := t.entries[k]; {
	case !ok:
	case f.count <= 1:
		delete(t.entries, k)
	default:
		f.count--
		t.entries[k] = f
	}
}
