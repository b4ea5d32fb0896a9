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
// tenant: a response of one tenant is never another's (Get and Delete
// answer as for an id never stored). Each is kept for at most the store's
// retention (the audit log's body retention: a stored response is a
// request's and a reply's bodies, and is kept no longer than the log
// keeps them), and the oldest are dropped first once the store holds more
// than its bound in bytes (ResponseSize). now is the pipeline's clock.
// The appliance keeps them on disk (server/responsestore), so that they
// outlive a restart; MemoryResponseStore keeps them in memory.
// Implementations are safe for concurrent use.
type ResponseStore interface {
	// Put stores r under (tenant, id), replacing what was there. A
	// response larger than the whole bound is not kept (nil error).
	Put(tenant, id string, r StoredResponse, now time.Time) error
	// Get returns a stored response not expired at now; ok is false
	// when there is none.
	Get(tenant, id string, now time.Time) (r StoredResponse, ok bool, err error)
	// Delete deletes a stored response; ok is false when there was none
	// (or it had expired).
	Delete(tenant, id string, now time.Time) (ok bool, err error)
}

// ResponseSize is what a stored response counts against a store's bound
// in bytes: its body and its history's messages, encoded.
func ResponseSize(r StoredResponse) int64 {
	size := int64(len(r.Body))
	for _, m := range r.History {
		size += int64(proto.Size(m))
	}
	return size
}

// MemoryResponseStore is a ResponseStore in memory: it does not outlive
// the process. It serves tests and an embedded pipeline; the appliance
// keeps its stored responses on disk.
type MemoryResponseStore struct {
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

// NewMemoryResponseStore returns a store keeping each response for ttl,
// and at most maxBytes in all (0 means DefaultResponseStoreBytes).
func NewMemoryResponseStore(ttl time.Duration, maxBytes int64) *MemoryResponseStore {
	if maxBytes <= 0 {
		maxBytes = DefaultResponseStoreBytes
	}
	return &MemoryResponseStore{ttl: ttl, maxBytes: maxBytes, entries: map[storeKey]*list.Element{}, order: list.New()}
}

// Put implements ResponseStore.
func (s *MemoryResponseStore) Put(tenant, id string, r StoredResponse, now time.Time) error {
	size := ResponseSize(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := storeKey{tenant, id}
	if el, ok := s.entries[k]; ok {
		s.remove(el)
	}
	if size > s.maxBytes {
		return nil
	}
	s.entries[k] = s.order.PushBack(&storeEntry{key: k, expires: now.Add(s.ttl), size: size, resp: r})
	s.bytes += size
	for s.bytes > s.maxBytes {
		s.remove(s.order.Front())
	}
	s.expire(now)
	return nil
}

// Get implements ResponseStore.
func (s *MemoryResponseStore) Get(tenant, id string, now time.Time) (StoredResponse, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	el, ok := s.entries[storeKey{tenant, id}]
	if !ok {
		return StoredResponse{}, false, nil
	}
	return el.Value.(*storeEntry).resp, true, nil
}

// Delete implements ResponseStore.
func (s *MemoryResponseStore) Delete(tenant, id string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	el, ok := s.entries[storeKey{tenant, id}]
	if ok {
		s.remove(el)
	}
	return ok, nil
}

// expire drops the responses past their retention: the oldest are first.
func (s *MemoryResponseStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*storeEntry).expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *MemoryResponseStore) remove(el *list.Element) {
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
// store (Config.Responses nil) it keeps nothing. A store that fails is
// logged: the response is still answered (it is recorded, and its tokens
// charged), and its id is then not found.
func (c *Call) StoreResponse(id string, r StoredResponse) {
	if s := c.p.cfg.Responses; s != nil {
		if err := s.Put(c.principal.TenantID, id, r, c.p.cfg.Now()); err != nil {
			c.p.log.Error("storing a response failed; its id will not be found", "request_id", c.id, "response_id", id, "err", err)
		}
	}
}

// LoadResponse returns a stored response of the call's tenant, or a
// KindNotFound error naming param (empty for a path's id); KindInternal
// when the store fails.
func (c *Call) LoadResponse(id, param string) (StoredResponse, error) {
	if s := c.p.cfg.Responses; s != nil {
		r, ok, err := s.Get(c.principal.TenantID, id, c.p.cfg.Now())
		if err != nil {
			return StoredResponse{}, c.storeError("load", err)
		}
		if ok {
			return r, nil
		}
	}
	e := errResponseNotFound(id)
	e.Param = param
	return StoredResponse{}, e
}

// DeleteResponse deletes a stored response of the call's tenant, or
// returns KindNotFound (KindInternal when the store fails).
func (c *Call) DeleteResponse(id string) error {
	if s := c.p.cfg.Responses; s != nil {
		ok, err := s.Delete(c.principal.TenantID, id, c.p.cfg.Now())
		if err != nil {
			return c.storeError("delete", err)
		}
		if ok {
			return nil
		}
	}
	return errResponseNotFound(id)
}

// storeError is a failed stored-response store, logged here.
func (c *Call) storeError(op string, err error) *Error {
	c.p.log.Error("stored responses: "+op+" failed", "request_id", c.id, "err", err)
	e := Internal(err)
	e.Logged = true
	return e
}

// AdmitLookup admits a request that reads or deletes what the key's
// tenant stored: it counts against the key's RPM and reserves no tokens.
// No policy is asked: the request reaches no model, and only what the
// tenant's own requests produced under the policy.
func (c *Call) AdmitLookup(ctx context.Context) error { return c.Admit(ctx, 0) }
