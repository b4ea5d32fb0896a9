package keys

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// The rules below repeat the constraints of tollgate/keys/v1/keys.proto, so
// that callers which bypass the gRPC service (seeds, `tollgate dev`) are held
// to the same rules, and so that the record layout can rely on them (a
// tenant id never contains a slash). Ids are checked with internal/ids,
// which defines their formats for the protos too.
var scopeRe = regexp.MustCompile(`^tool:(\*|[A-Za-z0-9_-]{1,64})$`)

const (
	maxLabelLen = 128
	maxItems    = 256
)

// The largest limits a key may have: far beyond any real key, and small
// enough that the limiter's sums (a window's counter plus a slice, plus
// the usage settled past a reservation) stay far from int64's bounds.
const (
	MaxRPM = 1_000_000_000         // requests a minute
	MaxTPD = 1_000_000_000_000_000 // tokens a day
	// MaxOutputTokens is the largest per-reply maximum a key may set.
	MaxOutputTokens = 1_000_000_000
)

// ValidScope reports whether s is a scope: tool:<name> or tool:*.
func ValidScope(s string) bool { return scopeRe.MatchString(s) }

// ValidLabel reports whether l is a label: 1 to 128 characters of UTF-8.
func ValidLabel(l string) bool {
	n := utf8.RuneCountInString(l)
	return utf8.ValidString(l) && n >= 1 && n <= maxLabelLen
}

// ValidDeclaredSecret reports whether s may be declared as a secret (by a
// seed): it starts with SecretPrefix and has at least MinSecretLen bytes.
func ValidDeclaredSecret(s string) bool {
	return strings.HasPrefix(s, SecretPrefix) && len(s) >= MinSecretLen
}

// Spec is what a key is created from: every setting of the key, none of its
// identity (key id, secret, times set by the store).
type Spec struct {
	TenantID string
	// Label is unique within the tenant.
	Label string
	// AllModels allows every model; Models must then be empty.
	AllModels bool
	// Models are the allowed model ids when AllModels is false.
	Models []string
	// RPM and TPD limits; 0 means no limit of that kind.
	RPM int64
	TPD int64
	// MaxOutputTokens is the most completion tokens one reply may have;
	// 0 means no maximum of the key's.
	MaxOutputTokens int64
	// Scopes such as tool:get_weather or tool:*.
	Scopes []string
	// ExpireTime is when the key stops authenticating; zero never.
	ExpireTime time.Time
}

// Validate checks s against the rules of the CreateKey request. The error
// wraps ErrInvalid and names every broken rule. An ExpireTime in the past is
// valid: the key exists and never authenticates.
func (s *Spec) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !ids.ValidTenant(s.TenantID) {
		bad("tenant id %q does not match %s", s.TenantID, ids.TenantPattern)
	}
	if !ValidLabel(s.Label) {
		bad("label must be 1 to %d characters of UTF-8", maxLabelLen)
	}
	if s.AllModels && len(s.Models) > 0 {
		bad("set all models or list models, not both")
	}
	if len(s.Models) > maxItems {
		bad("at most %d models", maxItems)
	}
	for _, m := range s.Models {
		if !ids.ValidModel(m) {
			bad("model %q is not <namespace>/<model_name>", m)
		}
	}
	if s.RPM < 0 || s.RPM > MaxRPM {
		bad("rpm must be 0 (no limit) to %d", MaxRPM)
	}
	if s.TPD < 0 || s.TPD > MaxTPD {
		bad("tpd must be 0 (no limit) to %d", MaxTPD)
	}
	if s.MaxOutputTokens < 0 || s.MaxOutputTokens > MaxOutputTokens {
		bad("max output tokens must be 0 (no maximum) to %d", MaxOutputTokens)
	}
	if len(s.Scopes) > maxItems {
		bad("at most %d scopes", maxItems)
	}
	for _, sc := range s.Scopes {
		if !ValidScope(sc) {
			bad("scope %q is not tool:<name> or tool:*", sc)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}
