package policy

import (
	"crypto/rand"
	"encoding/hex"
	"slices"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// DeniedBy names the check that refused a request.
type DeniedBy string

// The checks a decision runs, in order.
const (
	// DeniedByNone: the request is allowed.
	DeniedByNone DeniedBy = ""
	// DeniedByModel: the key does not allow the model.
	DeniedByModel DeniedBy = "model"
	// DeniedByToolScope: an offered tool, or the tool named by tool_choice,
	// is not covered by a tool:<name> or tool:* scope of the key.
	DeniedByToolScope DeniedBy = "tool_scope"
	// DeniedByToolChoice: tool_choice names a tool the request does not
	// offer, or is required while no tool is offered.
	DeniedByToolChoice DeniedBy = "tool_choice"
	// DeniedByBundle: the policy bundle denied the request, or narrowed its
	// tools so that tool_choice can no longer be honoured.
	DeniedByBundle DeniedBy = "bundle"
)

// Decision is the outcome of one evaluation. Allowed or not, it has an ID
// and has been written to the decision log.
type Decision struct {
	// ID is dec_<random>, unique per decision.
	ID    string
	Allow bool
	// Reason says why, in words fit for the client on a denial.
	Reason   string
	DeniedBy DeniedBy
	// AllowedTools are the tools that may be exposed to the model, in
	// request order: the offered tools, narrowed by the bundle when it
	// narrows. Empty on a denial.
	AllowedTools []string
	// DeniedTools are offered tools that may not be exposed: those outside
	// the key's scopes on a scope denial, those the bundle removed when it
	// narrows (the request may still be allowed without them).
	DeniedTools []string
	// Narrowed is true when the request is allowed but the bundle removed
	// at least one offered tool: the caller must offer the model
	// AllowedTools only.
	Narrowed bool
	// BundleRevision and BundleDigest identify the bundle that was active.
	BundleRevision string
	BundleDigest   string
}

// Exposes reports whether the decision allows exposing tool name to the
// model. A tool call an engine returns for a tool that is not exposed must
// never be passed to the client.
func (d *Decision) Exposes(name string) bool {
	return d.Allow && slices.Contains(d.AllowedTools, name)
}

// newDecisionID returns dec_ followed by 32 hex digits (128 random bits).
func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	var out [len(ids.DecisionPrefix) + 32]byte
	copy(out[:], ids.DecisionPrefix)
	hex.Encode(out[len(ids.DecisionPrefix):], b[:])
	return string(out[:])
}
