// Package limits enforces each virtual key's requests-per-minute (RPM) and
// tokens-per-day (TPD) limits exactly across every gateway that shares one
// etcd cluster, without an etcd round trip per request.
//
// Counters live in etcd, one per key, kind and window:
//
//	/tollgate/limits/<tenant>/<key_id>/rpm/<unix minute start>  requests granted
//	/tollgate/limits/<tenant>/<key_id>/tpd/<YYYY-MM-DD>         tokens granted
//
// A counter holds what has been granted to gateways, not what was used. A
// gateway takes a slice of the remaining budget in one compare-and-swap
// transaction and admits from memory until the slice is spent; a gateway
// returns what it did not use (idle slices, token reservations settled
// below their estimate, shutdown). Because the counter never falls below
// what gateways may still admit, the sum admitted in a window can never
// exceed the limit, whatever the number of gateways, and a gateway that
// dies loses at most the slices it held. See docs/limits.md.
package limits
