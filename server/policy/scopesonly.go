package policy

import (
	"context"
	"errors"
	"slices"
)

// ScopesOnly decides with the key's model and tool: scopes alone: the
// stage Engine.Decide runs in Go before any bundle, without a bundle, an
// ID or a log line. A gateway with no bundle (edge.Config without a
// Policy: tests and embedders; the binaries always load one) decides with
// it, so that a key's scopes hold whether or not a bundle is loaded.
type ScopesOnly struct{}

// Decide allows the request, exposing every offered tool, when the key
// allows its model and covers its tools and tool_choice; otherwise it
// denies it as Engine.Decide would.
func (ScopesOnly) Decide(_ context.Context, in Input) (Decision, error) {
	if in.Key == nil {
		return Decision{}, errors.New("policy: Decide without a key")
	}
	var d Decision
	if den := checkKey(&in, in.Request.effectiveToolChoice()); den != nil {
		d.deny(den)
		return d, nil
	}
	d.Allow, d.Reason, d.AllowedTools = true, "allowed", slices.Clone(in.Request.Tools)
	return d, nil
}
