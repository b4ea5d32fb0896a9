package limits

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// A key is forgotten only when nothing of it is in flight: a balance
// charging a debt holds the bucket's slot with local at 0, and a charge
// that fails puts the debt back, which a forgotten state would lose.
func TestEvictKeepsAKeyWithAnOperationInFlight(t *testing.T) {
	clk := newClock()
	l := New(nil, Config{GatewayID: "gw0", Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p := principal(60, 1000)
	cutoff := clk.Now().Add(time.Hour)
	for _, tc := range []struct {
		name  string
		busy  func(b *bucket)
		evict bool
	}{
		{"idle", func(*bucket) {}, true},
		{"slot taken", func(b *bucket) { b.sem <- struct{}{} }, false},
		{"units being returned", func(b *bucket) { b.returning = 5 }, false},
		{"debt being charged", func(b *bucket) { b.returning = -5 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := l.state(p)
			tc.busy(&ks.tpd)
			l.evict(ks, cutoff)
			if ks.dead != tc.evict {
				t.Fatalf("evicted: %v, want %v", ks.dead, tc.evict)
			}
			l.keys.Delete(keyRef{p.TenantID, p.KeyID})
		})
	}
}
