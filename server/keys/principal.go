package keys

import (
	"errors"
	"time"
)

// ErrUnauthorized is returned for a secret that is missing, unknown, expired
// or revoked. Callers map it to HTTP 401 unauthorized / gRPC Unauthenticated
// and must not tell the cases apart to the client.
var ErrUnauthorized = errors.New("keys: missing, unknown, expired or revoked key")

// Principal is the authenticated view of a virtual key that the request hot
// path works with. It is immutable once published by the cache: a changed
// key record produces a new Principal, so holders may keep a pointer for the
// whole request without locking.
type Principal struct {
	TenantID string
	KeyID    string
	Label    string
	// AllModels is true when every model is allowed; Models is then empty.
	AllModels bool
	Models    map[string]struct{}
	// RPM and TPD limits; 0 means no limit of that kind.
	RPM int64
	TPD int64
	// MaxOutputTokens is the most completion tokens one reply may have;
	// 0 means the key sets no maximum.
	MaxOutputTokens int64
	// Scopes as stored, for example "tool:get_weather".
	Scopes     []string
	scopeSet   map[string]struct{}
	ExpireTime time.Time // zero: never expires
}

// NewPrincipal builds a Principal and its lookup sets.
func NewPrincipal(tenantID, keyID, label string, allModels bool, models []string, rpm, tpd int64, scopes []string, expire time.Time) *Principal {
	p := &Principal{
		TenantID:   tenantID,
		KeyID:      keyID,
		Label:      label,
		AllModels:  allModels,
		Models:     make(map[string]struct{}, len(models)),
		RPM:        rpm,
		TPD:        tpd,
		Scopes:     append([]string(nil), scopes...),
		scopeSet:   make(map[string]struct{}, len(scopes)),
		ExpireTime: expire,
	}
	for _, m := range models {
		p.Models[m] = struct{}{}
	}
	for _, s := range scopes {
		p.scopeSet[s] = struct{}{}
	}
	return p
}

// AllowsModel reports whether the key may list and use model id.
func (p *Principal) AllowsModel(id string) bool {
	if p.AllModels {
		return true
	}
	_, ok := p.Models[id]
	return ok
}

// HasScope reports whether the key holds scope s exactly.
func (p *Principal) HasScope(s string) bool {
	_, ok := p.scopeSet[s]
	return ok
}

// ExpiredAt reports whether the key has expired at t.
func (p *Principal) ExpiredAt(t time.Time) bool {
	return !p.ExpireTime.IsZero() && !t.Before(p.ExpireTime)
}
