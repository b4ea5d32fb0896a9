package keys

import (
	"crypto/sha256"
	"log/slog"
)

// entry is one key as the cache holds it. Entries are immutable once built.
type entry struct {
	hash      [sha256.Size]byte
	record    *record
	principal *Principal
}

// keyRef names a key across tenants.
type keyRef struct{ tenantID, keyID string }

// view is an immutable snapshot of every key, published atomically: readers
// load the current pointer and never lock.
type view struct {
	// byHash holds the keys that are not revoked, by secret hash. A hash
	// that two such keys share is left out: neither authenticates.
	byHash map[[sha256.Size]byte]*entry
	// byRef holds every key.
	byRef map[keyRef]*entry
}

// newEntry builds the cache entry of r.
func newEntry(r *record) (*entry, error) {
	h, err := r.secretHash()
	if err != nil {
		return nil, err
	}
	return &entry{hash: h, record: r, principal: r.principal()}, nil
}

// buildView indexes entries (keyed by etcd key). It costs O(len(entries)),
// paid once per watch response, off the request path.
func buildView(entries map[string]*entry, log *slog.Logger) *view {
	v := &view{
		byHash: make(map[[sha256.Size]byte]*entry, len(entries)),
		byRef:  make(map[keyRef]*entry, len(entries)),
	}
	shared := make(map[[sha256.Size]byte][]string)
	for _, e := range entries {
		r := e.record
		v.byRef[keyRef{r.TenantID, r.KeyID}] = e
		if r.revoked() {
			continue
		}
		if prev, dup := v.byHash[e.hash]; dup {
			if shared[e.hash] == nil {
				shared[e.hash] = []string{prev.record.TenantID + "/" + prev.record.KeyID}
			}
			shared[e.hash] = append(shared[e.hash], r.TenantID+"/"+r.KeyID)
			continue
		}
		v.byHash[e.hash] = e
	}
	for h, refs := range shared {
		delete(v.byHash, h)
		log.Error("keys share a secret; none of them authenticates until the secrets differ", slog.Any("keys", refs))
	}
	return v
}
