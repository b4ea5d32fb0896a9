package log

import "github.com/prometheus/client_golang/prometheus"

var (
	descEvents = prometheus.NewDesc("tollgate_audit_events_total",
		"Audit events durably journaled and acknowledged since start.", nil, nil)
	descCommits = prometheus.NewDesc("tollgate_audit_commits_total",
		"Group commits (one journal write and fdatasync each) since start.", nil, nil)
	descApplies = prometheus.NewDesc("tollgate_audit_applies_total",
		"bbolt transactions applying the journal to audit.db since start.", nil, nil)
	descBacklog = prometheus.NewDesc("tollgate_audit_apply_backlog_events",
		"Events journaled and acknowledged but not yet applied to audit.db.", nil, nil)
	descQueueFull = prometheus.NewDesc("tollgate_audit_queue_full_waits_total",
		"Appends that found the commit queue full and waited since start.", nil, nil)
	descReplayed = prometheus.NewDesc("tollgate_audit_replayed_events",
		"Events replayed from the journal at start (journaled before a stop, not yet applied).", nil, nil)
	descInterrupted = prometheus.NewDesc("tollgate_audit_interrupted_streams",
		"Streams recorded at start as interrupted (status 599): begun before a crash or stop, never recorded.", nil, nil)
	descFailed = prometheus.NewDesc("tollgate_audit_failed",
		"1 when a failed write, sync or apply makes the log refuse appends until restarted.", nil, nil)
	descBodyBytes = prometheus.NewDesc("tollgate_audit_body_bytes_total",
		"Bytes of the acknowledged events' request and response bodies as received and sent, since start.", nil, nil)
	descStoredBodyBytes = prometheus.NewDesc("tollgate_audit_stored_body_bytes_total",
		"Bytes the same bodies take in the journal (compressed), since start.", nil, nil)
	descJournalBytes = prometheus.NewDesc("tollgate_audit_journal_bytes_total",
		"Bytes of journal frames (leaves and stored bodies) written for acknowledged events, since start.", nil, nil)
)

// durationBuckets resolve the audit step's cost around its budget (≤ 1 ms
// p99 added to a request) finely, and its tail coarsely.
var durationBuckets = []float64{
	.00005, .0001, .00015, .0002, .00025, .0003, .0004, .0005, .0006, .0007, .0008, .0009,
	.001, .00125, .0015, .002, .003, .005, .01, .025, .05, .1, .25, 1,
}

func newAppendSeconds() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tollgate_audit_append_seconds",
		Help:    "Time an Append takes, from the call to its event being durable (or failed): what the audit step adds to a request.",
		Buckets: durationBuckets,
	})
}

// newSyncSeconds is the disk's share of an append: beside
// tollgate_audit_append_seconds it tells a slow disk from a slow log.
func newSyncSeconds() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tollgate_audit_sync_seconds",
		Help:    "Time each group commit's fdatasync of the journal takes.",
		Buckets: durationBuckets,
	})
}

// Metrics returns a Prometheus collector of the log's counters, to
// register with the appliance's registry.
func (l *Log) Metrics() prometheus.Collector { return collector{l} }

type collector struct{ l *Log }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEvents, descCommits, descApplies, descBacklog, descQueueFull, descReplayed, descInterrupted, descFailed,
		descBodyBytes, descStoredBodyBytes, descJournalBytes} {
		ch <- d
	}
	c.l.appendSeconds.Describe(ch)
	c.l.syncSeconds.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	c.l.apply.mu.Lock()
	backlog, applyErr := c.l.apply.backlog(), c.l.apply.err
	c.l.apply.mu.Unlock()
	failed := 0.0
	if c.l.failure() != nil || applyErr != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(s.Events))
	ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(descApplies, prometheus.CounterValue, float64(s.Applies))
	ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(descQueueFull, prometheus.CounterValue, float64(s.QueueFullWaits))
	ch <- prometheus.MustNewConstMetric(descReplayed, prometheus.GaugeValue, float64(s.Replayed))
	ch <- prometheus.MustNewConstMetric(descInterrupted, prometheus.GaugeValue, float64(s.Interrupted))
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(descBodyBytes, prometheus.CounterValue, float64(s.BodyBytes))
	ch <- prometheus.MustNewConstMetric(descStoredBodyBytes, prometheus.CounterValue, float64(s.StoredBodyBytes))
	ch <- prometheus.MustNewConstMetric(descJournalBytes, prometheus.CounterValue, float64(s.JournalBytes))
	c.l.appendSeconds.Collect(ch)
	c.l.syncSeconds.Collect(ch)
}
