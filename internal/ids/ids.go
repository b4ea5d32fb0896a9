// Package ids checks the identifier formats the audit log records: they end
// up in leaves, bbolt keys and the origin line of signed heads, so each is
// restricted to a small alphabet without '/', NUL or whitespace.
package ids

import (
	"fmt"
	"regexp"
)

// The formats, matching the protovalidate patterns of the Keys, Policy and
// Inference protos.
var (
	tenantRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	applianceRE = regexp.MustCompile(`^app_[A-Za-z0-9_-]{1,64}$`)
	requestRE   = regexp.MustCompile(`^req_[A-Za-z0-9]{1,64}$`)
	keyRE       = regexp.MustCompile(`^key_[A-Za-z0-9]{1,64}$`)
	decisionRE  = regexp.MustCompile(`^dec_[A-Za-z0-9]{1,64}$`)
)

// CheckTenant reports whether s is a tenant id.
func CheckTenant(s string) error { return check("tenant_id", s, tenantRE) }

// CheckAppliance reports whether s is an appliance id, app_<id>.
func CheckAppliance(s string) error { return check("appliance_id", s, applianceRE) }

// CheckRequest reports whether s is a request id, req_<id>.
func CheckRequest(s string) error { return check("request_id", s, requestRE) }

// CheckKey reports whether s is a key id, key_<id>.
func CheckKey(s string) error { return check("key_id", s, keyRE) }

// CheckDecision reports whether s is a policy decision id, dec_<id>.
func CheckDecision(s string) error { return check("policy_decision_id", s, decisionRE) }

func check(field, s string, re *regexp.Regexp) error {
	if !re.MatchString(s) {
		return fmt.Errorf("ids: %s %q does not match %s", field, s, re)
	}
	return nil
}
