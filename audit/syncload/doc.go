// Package syncload measures durable writes on a disk under a paced load:
// arrival times at a rate (evenly spaced or a Poisson process), a driver
// that runs a call at each arrival on a goroutine of its own, as finishing
// requests would, and the percentiles of how long the calls took.
//
// Two baselines come with it: Floor, the least any durable group commit
// can cost on a disk at given arrivals, and Syncs, one write and
// fdatasync at a time. The audit log's benchmarks and `tollgate audit
// check-disk` share them, so that a site measures its own disk the way
// docs/audit-format.md measured ours.
package syncload
