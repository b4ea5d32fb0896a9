// Package ids defines every identifier format of Tollgate: tenant, key,
// appliance, request, policy decision and model ids, and the UTC day.
// Keys, policy, the audit log, the edge, the portal and the central plane
// all check ids here. Ids end up in etcd keys, audit leaves, bbolt keys
// and the origin line of signed heads, so each is restricted to a small
// alphabet without NUL or whitespace, and all but model ids without '/'.
//
// The protovalidate rules of the protos in proto/ repeat these patterns,
// since a proto cannot import Go; a test of this package reads the
// generated descriptors and fails when one of them differs.
package ids

import (
	"fmt"
	"regexp"
)

// The prefixes of the ids Tollgate makes.
const (
	KeyPrefix       = "key_"
	AppliancePrefix = "app_"
	RequestPrefix   = "req_"
	DecisionPrefix  = "dec_"
)

// The formats, as regular expressions (RE2, anchored). The protos' string
// patterns are the same text; an optional id's is ^(X)?$ around the body X.
const (
	// TenantPattern: 1 to 63 lowercase letters, digits, '_' or '-',
	// starting with a letter or digit.
	TenantPattern = `^[a-z0-9][a-z0-9_-]{0,62}$`
	// KeyPattern: key_ and 1 to 64 letters or digits.
	KeyPattern = `^` + KeyPrefix + `[A-Za-z0-9]{1,64}$`
	// AppliancePattern: app_ and 1 to 64 letters, digits, '_' or '-'.
	AppliancePattern = `^` + AppliancePrefix + `[A-Za-z0-9_-]{1,64}$`
	// RequestPattern: req_ and 1 to 64 letters or digits.
	RequestPattern = `^` + RequestPrefix + `[A-Za-z0-9]{1,64}$`
	// DecisionPattern: dec_ and 1 to 64 letters or digits.
	DecisionPattern = `^` + DecisionPrefix + `[A-Za-z0-9]{1,64}$`
	// ModelPattern: <namespace>/<model_name>, each as below.
	ModelPattern = `^` + modelNamespace + `/` + modelName + `$`
	// ModelNamespacePattern: 1 to 64 letters, digits, '.', '_' or '-',
	// starting with a letter or digit.
	ModelNamespacePattern = `^` + modelNamespace + `$`
	// ModelNamePattern: 1 to 192 letters, digits, '.', '_', ':', '/' or
	// '-', starting with a letter or digit.
	ModelNamePattern = `^` + modelName + `$`
	// DayPattern is the shape of a UTC day, YYYY-MM-DD, as the protos check
	// it; ParseDay also checks that it is a day of the calendar.
	DayPattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`

	modelNamespace = `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`
	modelName      = `[A-Za-z0-9][A-Za-z0-9._:/-]{0,191}`
)

var (
	tenantRE         = regexp.MustCompile(TenantPattern)
	keyRE            = regexp.MustCompile(KeyPattern)
	applianceRE      = regexp.MustCompile(AppliancePattern)
	requestRE        = regexp.MustCompile(RequestPattern)
	decisionRE       = regexp.MustCompile(DecisionPattern)
	modelRE          = regexp.MustCompile(ModelPattern)
	modelNamespaceRE = regexp.MustCompile(ModelNamespacePattern)
	modelNameRE      = regexp.MustCompile(ModelNamePattern)
)

// ValidTenant reports whether s is a tenant id.
func ValidTenant(s string) bool { return tenantFormat.match(s) }

// ValidKey reports whether s is a key id, key_<id>.
func ValidKey(s string) bool { return keyFormat.match(s) }

// ValidModel reports whether s is a model id, <namespace>/<model_name>.
func ValidModel(s string) bool { return matchModel(s) }

// ValidModelNamespace reports whether s is the namespace of a model id.
func ValidModelNamespace(s string) bool { return namespaceFormat.match(s) }

// ValidModelName reports whether s is the model name of a model id.
func ValidModelName(s string) bool { return nameFormat.match(s) }

// CheckTenant reports whether s is a tenant id.
func CheckTenant(s string) error { return check("tenant_id", s, tenantFormat) }

// CheckAppliance reports whether s is an appliance id, app_<id>.
func CheckAppliance(s string) error { return check("appliance_id", s, applianceFormat) }

// CheckRequest reports whether s is a request id, req_<id>.
func CheckRequest(s string) error { return check("request_id", s, requestFormat) }

// CheckKey reports whether s is a key id, key_<id>.
func CheckKey(s string) error { return check("key_id", s, keyFormat) }

// CheckDecision reports whether s is a policy decision id, dec_<id>.
func CheckDecision(s string) error { return check("policy_decision_id", s, decisionFormat) }

func check(field, s string, f *format) error {
	if !f.match(s) {
		return fmt.Errorf("ids: %s %q does not match %s", field, s, f.re)
	}
	return nil
}
