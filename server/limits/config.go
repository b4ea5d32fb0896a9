package limits

import (
	"log/slog"
	"os"
	"time"
)

// Config configures a Limiter. Zero fields take the documented defaults;
// docs/limits.md explains what each tunable trades.
type Config struct {
	// GatewayID names this gateway in logs. Default: the host name.
	GatewayID string
	// Now is the clock that windows, traffic rates, idleness and the
	// recheck interval are measured with. Default: time.Now. Network
	// timeouts and the background tickers use real time.
	Now    func() time.Time
	Logger *slog.Logger

	// Horizon is how much of its own recent traffic a gateway asks for in
	// one slice. Default 2s.
	Horizon time.Duration
	// FairShare caps a slice at 1/FairShare of what the window has left,
	// so slices shrink as the budget runs out and the last units go one
	// at a time. Default 4.
	FairShare int64
	// PrefetchBelow starts a background grant when a slice is down to
	// 1/PrefetchBelow of its size, so requests rarely wait. Default 4.
	PrefetchBelow int64
	// IdleAfter returns a key's slice to etcd when the key has had no
	// request on this gateway for this long. Default 1s.
	IdleAfter time.Duration
	// Recheck: once etcd showed a window too short for a request, requests
	// that do not fit are refused from memory until the watch shows units
	// coming back, the window ends, or this long has passed (a fallback),
	// so a flood of refused requests costs no etcd traffic. Default 5s.
	Recheck time.Duration
	// EvictAfter forgets a key that has held nothing and seen no request
	// for this long. Default 10m.
	EvictAfter time.Duration
	// LeaseMargin keeps a window's counter in etcd this long after the
	// window ends; then its lease deletes it. Default 10m.
	LeaseMargin time.Duration

	// SweepEvery is how often Run looks for idle slices (real time).
	// Default 250ms.
	SweepEvery time.Duration
	// ProbeEvery is how often Run checks etcd while degraded (real time).
	// Default 1s.
	ProbeEvery time.Duration
	// IdleProbe: while healthy, Run checks etcd when no etcd operation
	// succeeded for this long, so an idle gateway notices an outage.
	// Default 10s.
	IdleProbe time.Duration
	// GrantTimeout bounds every etcd operation. Default 2s.
	GrantTimeout time.Duration
	// ShutdownTimeout bounds giving everything back when Run ends.
	// Default 5s.
	ShutdownTimeout time.Duration
	// Workers is the number of background prefetch workers Run starts.
	// Default 4.
	Workers int

	// observed, when set (by tests), is called for every counter change
	// the watch applied.
	observed func(key string, val int64)
	// healthChanged, when set (by tests), is called on every change of
	// health.
	healthChanged func(up bool)
}

func (c Config) withDefaults() Config {
	if c.GatewayID == "" {
		c.GatewayID, _ = os.Hostname()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Horizon, 2*time.Second)
	def(&c.IdleAfter, time.Second)
	def(&c.Recheck, 5*time.Second)
	def(&c.EvictAfter, 10*time.Minute)
	def(&c.LeaseMargin, 10*time.Minute)
	def(&c.SweepEvery, 250*time.Millisecond)
	def(&c.ProbeEvery, time.Second)
	def(&c.IdleProbe, 10*time.Second)
	def(&c.GrantTimeout, 2*time.Second)
	def(&c.ShutdownTimeout, 5*time.Second)
	if c.FairShare <= 0 {
		c.FairShare = 4
	}
	if c.PrefetchBelow <= 0 {
		c.PrefetchBelow = 4
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	return c
}
