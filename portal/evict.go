package portal

import "time"

// evictOldest deletes the entry of m whose time (by at) is oldest: what a
// bounded map of the portal's forgets when it is full.
func evictOldest[V any](m map[string]V, at func(V) time.Time) {
	var oldest string
	var t time.Time
	for k, v := range m {
		if oldest == "" || at(v).Before(t) {
			oldest, t = k, at(v)
		}
	}
	delete(m, oldest)
}
