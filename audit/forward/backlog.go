package forward

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
)

// Backlog is what waits in the queue.
type Backlog struct {
	// Heads and Leaves queued, not yet stored by the central plane.
	Heads  int
	Leaves uint64
	// Oldest is when the oldest queued head was queued (zero when none).
	Oldest time.Time
	// Refused counts heads the central plane refused for good (kept in
	// the queue file's refused bucket).
	Refused int
}

// Backlog returns the queue's backlog (a zero Backlog if the file cannot
// be read).
func (f *Forwarder) Backlog() Backlog {
	var b Backlog
	_ = f.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketItems).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var it item
			if json.Unmarshal(v, &it) != nil {
				continue
			}
			if b.Heads == 0 {
				b.Oldest = it.Enqueued
			}
			b.Heads++
			b.Leaves += it.Leaves
		}
		b.Refused = tx.Bucket(bucketRefused).Stats().KeyN
		return nil
	})
	return b
}

type stats struct{ enqueued, sent, refused atomic.Uint64 }

var (
	descHeads = prometheus.NewDesc("tollgate_central_forward_backlog_heads",
		"Signed heads queued for the central plane, not yet stored by it.", nil, nil)
	descLeaves = prometheus.NewDesc("tollgate_central_forward_backlog_leaves",
		"Leaves queued for the central plane with their heads.", nil, nil)
	descAge = prometheus.NewDesc("tollgate_central_forward_backlog_age_seconds",
		"Age of the oldest queued head (0 when the queue is empty).", nil, nil)
	descHeadsTotal = prometheus.NewDesc("tollgate_central_forward_heads_total",
		"Heads queued, stored by the central plane, or refused by it for good, since start.", []string{"outcome"}, nil)
)

// collect sends the current metrics.
func (f *Forwarder) collect(ch chan<- prometheus.Metric) {
	b := f.Backlog()
	age := 0.0
	if b.Heads > 0 {
		age = f.opts.Now().Sub(b.Oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descHeads, prometheus.GaugeValue, float64(b.Heads))
	ch <- prometheus.MustNewConstMetric(descLeaves, prometheus.GaugeValue, float64(b.Leaves))
	ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, age)
	for outcome, v := range map[string]*atomic.Uint64{"queued": &f.stats.enqueued, "stored": &f.stats.sent, "refused": &f.stats.refused} {
		ch <- prometheus.MustNewConstMetric(descHeadsTotal, prometheus.CounterValue, float64(v.Load()), outcome)
	}
}

// Metrics returns a Prometheus collector of the backlog and outcomes, to
// register with the appliance's registry.
func (f *Forwarder) Metrics() prometheus.Collector { return collector{f} }

type collector struct{ f *Forwarder }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeads, descLeaves, descAge, descHeadsTotal} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) { c.f.collect(ch) }
