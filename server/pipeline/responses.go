package pipeline

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// DefaultResponseStoreBytes bounds the stored responses of an appliance
// when Config leaves it 0.
const DefaultResponseStoreBytes = 64 << 20

// StoredResponse is a response kept for GET /v1/responses/{id} and for
// previous_response_id.
type StoredResponse struct {
	// Body is the response object as it was sent (JSON).
	Body []byte
	// History is the conversation the response ends: the messages the
	// engine was given, the instructions aside (they are not carried
	// over to a continuation), then the reply as assistant messages.
	History []*inferencev1.Message
}

// ResponseStore keeps the stored responses of the Responses API, per
// tenant, in memory: each for at most its retention (the audit log's
// body retention: a stored response is a request's and a reply's bodies,
// and is kept no longer than the log keeps them), the oldest dropped first
// once the store holds more than its bound in bytes. It does not outlive
// the process (docs/gateway-api.md). It is safe for concurrent use.
type ResponseStore struct {
	ttl      time.Duration
	maxBytes int64

	mu      sync.Mutex
	bytes   int64
	entries map[storeKey]*list.Element
	order   *list.List // of *storeEntry, oldest first
}

type storeKey struct{ tenant, id string }

type storeEntry struct {
	key     storeKey
	expires time.Time
	size    int64
	resp    StoredResponse
}

// NewResponseStore returns a store keeping each response for ttl, and at
// most maxBytes in all (0 means DefaultResponseStoreBytes).
func NewResponseStore(ttl time.Duration, maxBytes int64) *ResponseStore {
	if maxBytes <= 0 {
		maxBytes = DefaultResponseStoreBytes
	}
	return &ResponseStore{ttl: ttl, maxBytes: maxBytes, entries: map[storeKey]*list.Element{}, order: list.New()}
}

func (s *ResponseStore) put(tenant, id string, r StoredResponse, now time.Time) {
	size := int64(len(r.Body))
	for _, m := range r.History {
		size += int64(proto.Size(m))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := storeKey{tenant, id}
	if el, ok := s.entries[k]; ok {
		s.remove(el)
	}
	if size > s.maxBytes {
		return
	}
	s.entries[k] = s.order.PushBack(&storeEntry{key: k, expires: now.Add(s.ttl), size: size, resp: r})
	s.bytes += size
	for s.bytes > s.maxBytes {
		s.remove(s.order.Front())
	}
	s.expire(now)
}

func (s *ResponseStore) get(tenant, id string, now time.Time) (StoredResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	el, ok := s.entries[storeKey{tenant, id}]
	if !ok {
		return StoredResponse{}, false
	}
	return el.Value.(*storeEntry).resp, true
}

func (s *ResponseStore) delete(tenant, id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	el, ok := s.entries[storeKey{tenant, id}]
	if ok {
		s.remove(el)
	}
	return ok
}

// expire drops the responses past their retention: the oldest are first.
func (s *ResponseStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*storeEntry).expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *ResponseStore) remove(el *list.Element) {
	e := s.order.Remove(el).(*storeEntry)
	delete(s.entries, e.key)
	s.bytes -= e.size
}

// errResponseNotFound is a stored response that does not exist, has
// expired, or is another tenant's: the same answer for all three, so that
// an id tells nothing about other tenants.
func errResponseNotFound(id string) *Error {
	return &Error{Kind: KindNotFound, Message: "response " + id + " does not exist (or is no longer stored)"}
}

// StoreResponse keeps a response of the call's tenant under id. Without a
// store (Config.Responses nil) it keeps nothing.
func (c *Call) StoreResponse(id string, r StoredResponse) {
	if s := c.p.cfg.Responses; s != nil {
		s.put(c.principal.TenantID, id, r, c.p.cfg.Now())
	}
}

// LoadResponse returns a stored response of the call's tenant, or a
// KindNotFound error naming param (empty for a path's id).
func (c *Call) LoadResponse(id, param string) (StoredResponse, error) {
	if s := c.p.cfg.Responses; s != nil {
		if r, ok := s.get(c.principal.TenantID, id, c.p.cfg.Now()); ok {
			return r, nil
		}
	}
	e := errResponseNotFound(id)
	e.Param = param
	return StoredResponse{}, e
}

// DeleteResponse deletes a stored response of the call's tenant, or
// returns KindNotFound.
func (c *Call) DeleteResponse(id string) error {
	if s := c.p.cfg.Responses; s != nil && s.delete(c.principal.TenantID, id, c.p.cfg.Now()) {
		return nil
	}
	return errResponseNotFound(id)
}

// AdmitLookup admits a request that reads or deletes what the key's
// tenant stored: it counts against the key's RPM and reserves no tokens.
// No policy is asked: the request reaches no model, and only what the
// tenant's own requests produced under the policy.
func (c *Call) AdmitLookup(ctx context.Context) error { return c.Admit(ctx, 0) }
