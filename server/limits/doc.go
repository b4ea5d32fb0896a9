// Package limits enforces each virtual key's requests-per-minute (RPM) and
// tokens-per-day (TPD) limits exactly across every gateway that shares one
// etcd cluster, without an etcd round trip per request.
//
// Counters live in etcd next to the key records, one per key, kind and
// window (RPM: the UTC minute; TPD: the UTC day):
//
//	/tollgate/limits/<tenant>/<key_id>/rpm/<Unix second of the minute>  requests granted
//	/tollgate/limits/<tenant>/<key_id>/tpd/<YYYY-MM-DD>                 tokens granted
//
// A counter holds what has been granted to gateways, not what was used. A
// gateway takes a slice of the remaining budget in one compare-and-swap
// transaction that never lets the counter pass the limit, and admits from
// memory until the slice is spent; it gives back what it did not use (idle
// slices, token reservations settled below their estimate, shutdown).
// Every unit counted is therefore admitted, held by a gateway, or lost
// with a dead one, so the admissions of a window, on all gateways
// together, never exceed the limit, and a gateway that dies loses at most
// what it held. While etcd is unreachable a gateway spends only what it
// holds. A watch keeps each gateway's view of the counters current, which
// saves conflicts but is never needed for exactness. See docs/limits.md.
//
// Files: admit.go (Admit, the hit path), grant.go (slices from etcd),
// settle.go (Reservation), balance.go and run.go (returns, shutdown),
// counter.go and lease.go (etcd transactions), watch.go, health.go,
// state.go and denied.go (headers, 429), bucket.go (per-key state,
// slice sizing), window.go, config.go.
package limits
