// Package auth authenticates callers of the central plane's audit API with
// tenant-scoped audit tokens, sent as `authorization: Bearer <token>`. A
// token reads its own tenant only. Tokens are held as SHA-256 digests;
// they come from `tollgate dev --seed` (audit_tokens) or the file given to
// `tollgate central --audit-tokens`.
package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// TokenPrefix starts every audit token; MinTokenLen is the shortest token.
const (
	TokenPrefix = "tga_"
	MinTokenLen = 12
)

// ValidToken reports whether s may be an audit token: TokenPrefix, at least
// MinTokenLen characters, printable ASCII without spaces.
func ValidToken(s string) bool {
	if !strings.HasPrefix(s, TokenPrefix) || len(s) < MinTokenLen || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Tokens maps audit token digests to tenants. Safe for concurrent use.
type Tokens struct {
	mu       sync.RWMutex
	byDigest map[[32]byte]string
	byTenant map[string][][32]byte
}

// NewTokens returns an empty set.
func NewTokens() *Tokens {
	return &Tokens{byDigest: map[[32]byte]string{}, byTenant: map[string][][32]byte{}}
}

// SetAuditTokens replaces the tokens of a tenant (none: the tenant has no
// access). A token already held by another tenant is refused.
func (t *Tokens) SetAuditTokens(_ context.Context, tenantID string, tokens []string) error {
	if err := ids.CheckTenant(tenantID); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	digests := make([][32]byte, 0, len(tokens))
	for i, tok := range tokens {
		if !ValidToken(tok) {
			return fmt.Errorf("auth: audit token %d of tenant %s must start with %s and have at least %d printable characters",
				i+1, tenantID, TokenPrefix, MinTokenLen)
		}
		digests = append(digests, sha256.Sum256([]byte(tok)))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range digests {
		if owner, ok := t.byDigest[d]; ok && owner != tenantID {
			return fmt.Errorf("auth: an audit token of tenant %s is already a token of tenant %s", tenantID, owner)
		}
	}
	for _, d := range t.byTenant[tenantID] {
		delete(t.byDigest, d)
	}
	for _, d := range digests {
		t.byDigest[d] = tenantID
	}
	t.byTenant[tenantID] = digests
	return nil
}

// Tenant returns the tenant of a token.
func (t *Tokens) Tenant(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	t.mu.RLock()
	defer t.mu.RUnlock()
	tenant, ok := t.byDigest[d]
	return tenant, ok
}

// LoadFile reads a tokens file, a YAML mapping of tenant id to its tokens:
//
//	acme: ["tga_..."]
//	globex: ["tga_...", "tga_..."]
func LoadFile(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	var m map[string][]string
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	t := NewTokens()
	for tenant, tokens := range m {
		if err := t.SetAuditTokens(context.Background(), tenant, tokens); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return t, nil
}
