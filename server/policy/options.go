package policy

import (
	"log/slog"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	opakeys "github.com/open-policy-agent/opa/v1/keys"
)

// DefaultKeyID is the verification key id used when LoadOptions.KeyID is
// empty, as `opa run --verification-key-id` defaults to.
const DefaultKeyID = "default"

// DefaultSigningAlg is the signing algorithm used when
// LoadOptions.Algorithm is empty, the default of `opa sign` and of
// `opa run --signing-alg`.
const DefaultSigningAlg = "RS256"

// LoadOptions configure how bundles are read and verified.
type LoadOptions struct {
	// VerificationKey, when set, makes signatures mandatory: every bundle
	// must carry a .signatures.json whose JWT verifies with this key and
	// whose file hashes match, or it is refused. It is a PEM public key (or
	// certificate) for RS*, PS* and ES* algorithms, the shared secret for
	// HS*. Empty: bundles are not verified, and a signed bundle is refused
	// because its signature cannot be checked.
	VerificationKey string
	// KeyID names the verification key; the signature's kid is not
	// consulted. Empty means DefaultKeyID.
	KeyID string
	// Algorithm is the signing algorithm (RS256, ES256, HS256, …); empty
	// means DefaultSigningAlg.
	Algorithm string
	// Scope must equal the scope claim of the signature. The check is
	// never skipped: empty means the signature must carry no scope, so a
	// bundle signed with a scope is refused ("scope mismatch") until the
	// same scope is configured.
	Scope string
	// Logger receives decision and reload lines; nil discards them.
	Logger *slog.Logger
	// NoDecisionMemo turns the decision memo off: every decision that
	// passes the scope stage evaluates the bundle. With it on (the
	// default), a bundle whose output provably depends only on input
	// fields that repeat between requests reuses the output it evaluated
	// for an earlier request equal on those fields (docs/policy.md,
	// "Memoized decisions").
	NoDecisionMemo bool
	// DecisionMemoEntries and DecisionMemoBytes bound each bundle's memo;
	// zero means DefaultDecisionMemoEntries and DefaultDecisionMemoBytes.
	DecisionMemoEntries int
	DecisionMemoBytes   int
}

// newMemo returns the memo of a bundle planned as plan, or nil when its
// decisions are not memoized (the reason is then in plan.off).
func (o LoadOptions) newMemo(plan *memoPlan) *memo {
	if o.NoDecisionMemo && plan.off == "" {
		plan.off = "switched off"
	}
	if plan.off != "" {
		return nil
	}
	entries, bytes := o.DecisionMemoEntries, o.DecisionMemoBytes
	if entries <= 0 {
		entries = DefaultDecisionMemoEntries
	}
	if bytes <= 0 {
		bytes = DefaultDecisionMemoBytes
	}
	return newMemo(*plan, entries, bytes)
}

func (o LoadOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// verificationConfig is OPA's verification config for o; nil when bundles
// are not verified.
func (o LoadOptions) verificationConfig() *opabundle.VerificationConfig {
	if o.VerificationKey == "" {
		return nil
	}
	id, alg := o.KeyID, o.Algorithm
	if id == "" {
		id = DefaultKeyID
	}
	if alg == "" {
		alg = DefaultSigningAlg
	}
	pub := map[string]*opakeys.Config{id: {Key: o.VerificationKey, Algorithm: alg, Scope: o.Scope}}
	return opabundle.NewVerificationConfig(pub, id, o.Scope, nil)
}
