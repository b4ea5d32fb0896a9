package seed

import (
	"fmt"
	"slices"

	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// validator collects problems.
type validator struct{ problems []Problem }

func (v *validator) add(line int, format string, args ...any) {
	v.problems = append(v.problems, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// validate checks every rule and reports every problem, by line.
func (s *Seed) validate() error {
	var v validator
	tenantLine := map[string]int{}
	secretOwner := map[string]string{} // secret -> where it was first declared
	tokenOwner := map[string]string{}  // audit token -> where it was first declared
	for i := range s.Tenants {
		t := &s.Tenants[i]
		if !ids.ValidTenant(t.ID) {
			v.add(t.pos.at("id"), "tenant id %q must match ^[a-z0-9][a-z0-9_-]{0,62}$", t.ID)
		}
		if first, dup := tenantLine[t.ID]; dup {
			v.add(t.pos.at("id"), "tenant %q is declared twice (first at line %d)", t.ID, first)
		} else {
			tenantLine[t.ID] = t.pos.at("id")
		}
		labelLine := map[string]int{}
		for j := range t.Keys {
			k := &t.Keys[j]
			k.validate(&v, t.ID)
			if first, dup := labelLine[k.Label]; dup {
				v.add(k.pos.at("label"), "tenant %q has two keys labelled %q (first at line %d)", t.ID, k.Label, first)
			} else {
				labelLine[k.Label] = k.pos.at("label")
			}
			if k.Secret == "" {
				continue
			}
			if first, dup := secretOwner[k.Secret]; dup {
				v.add(k.pos.at("secret"), "key %q has the same secret as %s; secrets must differ", k.Label, first)
			} else {
				secretOwner[k.Secret] = fmt.Sprintf("tenant %q key %q (line %d)", t.ID, k.Label, k.pos.at("secret"))
			}
		}
	}
	for i := range s.Tenants {
		s.Tenants[i].validateAuditTokens(&v, tokenOwner, secretOwner)
	}
	return errorOf(v.problems)
}

// validateAuditTokens checks a tenant's audit tokens: well formed, and
// unique across the file, key secrets included (a token names its tenant).
func (t *Tenant) validateAuditTokens(v *validator, owner, secrets map[string]string) {
	for i, tok := range t.AuditTokens {
		line := t.pos.item("audit_tokens", i)
		if !auth.ValidToken(tok) {
			v.add(line, "tenant %q: audit token %d must start with %s and have at least %d printable characters",
				t.ID, i+1, auth.TokenPrefix, auth.MinTokenLen)
			continue
		}
		if first, dup := secrets[tok]; dup {
			v.add(line, "tenant %q: audit token %d is the secret of %s; they must differ", t.ID, i+1, first)
		}
		if first, dup := owner[tok]; dup {
			v.add(line, "tenant %q: audit token %d is already declared (%s)", t.ID, i+1, first)
			continue
		}
		owner[tok] = fmt.Sprintf("tenant %q, line %d", t.ID, line)
	}
}

// validate checks one key of tenant.
func (k *Key) validate(v *validator, tenant string) {
	before := len(v.problems)
	if !keys.ValidLabel(k.Label) {
		v.add(k.pos.at("label"), "label must be 1 to 128 characters")
	}
	if !keys.ValidDeclaredSecret(k.Secret) {
		v.add(k.pos.at("secret"), "key %q: secret must start with %s and have at least %d characters",
			k.Label, keys.SecretPrefix, keys.MinSecretLen)
	}
	switch {
	case len(k.Models) == 0:
		v.add(k.pos.at("models"), `key %q: models is required: ["*"] for every model, or a list of <namespace>/<model_name>`, k.Label)
	case slices.Contains(k.Models, AllModels) && len(k.Models) > 1:
		v.add(k.pos.at("models"), `key %q: "*" allows every model and stands alone`, k.Label)
	case k.Models[0] != AllModels:
		for i, m := range k.Models {
			if !ids.ValidModel(m) {
				v.add(k.pos.item("models", i), "key %q: model %q is not <namespace>/<model_name>", k.Label, m)
			}
		}
	}
	for _, f := range []struct {
		name       string
		value, max int64
	}{{"rpm", k.RPM, keys.MaxRPM}, {"tpd", k.TPD, keys.MaxTPD}, {"max_output_tokens", k.MaxOutputTokens, keys.MaxOutputTokens}} {
		if tag := k.pos.tag(f.name); tag != "" && tag != "!!int" && tag != "!!null" {
			v.add(k.pos.at(f.name), "key %q: %s must be a whole number", k.Label, f.name)
		} else if f.value < 0 || f.value > f.max {
			v.add(k.pos.at(f.name), "key %q: %s must be 0 (no limit) to %d", k.Label, f.name, f.max)
		}
	}
	for i, s := range k.Scopes {
		if !keys.ValidScope(s) {
			v.add(k.pos.item("scopes", i), "key %q: scope %q is not tool:<name> or tool:*", k.Label, s)
		}
	}
	spec, err := k.spec(tenant)
	if err != nil {
		v.add(k.pos.at("expires_at"), "key %q: expires_at %q is not an RFC 3339 time such as 2030-01-01T00:00:00Z", k.Label, k.ExpiresAt)
	}
	if len(v.problems) > before {
		return
	}
	// The field checks above name the line at fault; the store's own rules
	// (list sizes and the like) catch the rest.
	if err := spec.Validate(); err != nil {
		v.add(k.pos.line, "key %q: %v", k.Label, err)
	}
}
