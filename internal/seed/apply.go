package seed

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Apply brings store in line with the seed: every key is upserted, matched
// by tenant and label, and an existing key takes the seed's models, limits,
// scopes, expiry, revoked state and secret while keeping its key id. A key
// the seed declares expired or revoked is stored as such. Keys the seed does
// not mention are left alone. Applying the same seed again changes nothing.
func (s *Seed) Apply(ctx context.Context, store *keys.Store) error {
	for _, t := range s.Tenants {
		for _, k := range t.Keys {
			spec, err := k.spec(t.ID)
			if err == nil {
				_, err = store.Upsert(ctx, spec)
			}
			if err != nil {
				return fmt.Errorf("seed: %stenant %s key %q: %w", k.pos.prefix(), t.ID, k.Label, err)
			}
		}
	}
	return nil
}

// spec is the store's form of k.
func (k *Key) spec(tenant string) (keys.UpsertSpec, error) {
	expire, err := k.expireTime()
	if err != nil {
		return keys.UpsertSpec{}, fmt.Errorf("expires_at: %w", err)
	}
	u := keys.UpsertSpec{
		Spec: keys.Spec{
			TenantID:        tenant,
			Label:           k.Label,
			RPM:             k.RPM,
			TPD:             k.TPD,
			MaxOutputTokens: k.MaxOutputTokens,
			Scopes:          k.Scopes,
			ExpireTime:      expire,
		},
		Secret:  k.Secret,
		Revoked: k.Revoked,
	}
	if len(k.Models) == 1 && k.Models[0] == AllModels {
		u.AllModels = true
	} else {
		u.Models = k.Models
	}
	return u, nil
}

// AuditTokenSetter receives a tenant's audit tokens; the central plane's
// token set (central/auth.Tokens) is one.
type AuditTokenSetter interface {
	SetAuditTokens(ctx context.Context, tenantID string, tokens []string) error
}

// ApplyAuditTokens gives every tenant that declares audit_tokens those
// tokens on dst, replacing the ones it had. Tenants without audit_tokens
// are left alone.
func (s *Seed) ApplyAuditTokens(ctx context.Context, dst AuditTokenSetter) error {
	for _, t := range s.Tenants {
		if len(t.AuditTokens) == 0 {
			continue
		}
		if err := dst.SetAuditTokens(ctx, t.ID, t.AuditTokens); err != nil {
			return fmt.Errorf("seed: %stenant %s audit tokens: %w", t.pos.prefix(), t.ID, err)
		}
	}
	return nil
}
