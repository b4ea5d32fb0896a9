package portal

import (
	"sync"
	"time"
)

// Sign-in throttling: after throttleFailures failed sign-ins in a row, an
// account accepts no attempt for throttleLock after the last failure; the
// attempt is refused without its password being checked. A success
// clears the count. The state is per portal process.
const (
	throttleFailures = 5
	throttleLock     = time.Minute
	// throttleMaxEntries bounds the accounts tracked; when full, the one
	// whose last failure is oldest is forgotten.
	throttleMaxEntries = 10_000
)

type failures struct {
	count int
	last  time.Time
}

// throttle counts failed sign-ins per tenant and user, whether or not the
// account exists, so that it tells nobody which do.
type throttle struct {
	mu      sync.Mutex
	entries map[string]failures
}

func newThrottle() *throttle { return &throttle{entries: make(map[string]failures)} }

func throttleKey(tenant, user string) string { return tenant + "\x00" + user }

// locked reports whether an attempt on the account must be refused at
// now, and until when.
func (t *throttle) locked(tenant, user string, now time.Time) (bool, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.entries[throttleKey(tenant, user)]
	if !ok || f.count < throttleFailures {
		return false, time.Time{}
	}
	until := f.last.Add(throttleLock)
	return now.Before(until), until
}

// failed records a failed attempt at now.
func (t *throttle) failed(tenant, user string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := throttleKey(tenant, user)
	f, ok := t.entries[k]
	if !ok && len(t.entries) >= throttleMaxEntries {
		t.evictOldest()
	}
	t.entries[k] = failures{count: f.count + 1, last: now}
}

// succeeded clears the account's failures.
func (t *throttle) succeeded(tenant, user string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, throttleKey(tenant, user))
}

func (t *throttle) evictOldest() {
	var oldest string
	var at time.Time
	for k, f := range t.entries {
		if oldest == "" || f.last.Before(at) {
			oldest, at = k, f.last
		}
	}
	delete(t.entries, oldest)
}
