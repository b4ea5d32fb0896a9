package rest

import "time"

// SetClock times the answers m counts with now instead of time.Now; set it
// before Instrument.
func (m *Metrics) SetClock(now func() time.Time) { m.now = now }
