// Package verify checks signed heads, inclusion and consistency proofs and
// the evidence of forks as the central plane serves them, receipts, and
// evidence bundles (a tenant's day as `tollgate audit export` writes it), offline, with
// nothing but the fleet CA certificate: strict parsing of the REST
// documents, the certificate chain (valid at signed_at), the appliance id,
// the signature over the exact checkpoint bytes, the Merkle inclusion,
// that a later head of a tree extends an earlier one, and for a fork that
// its two heads are incompatible views of one tree. Every failure has a
// Kind, and every Kind its own exit code for `tollgate verify`. The central plane's ingest uses
// the same head checks.
package verify

import (
	"errors"
	"fmt"
)

// Kind classifies a verification failure.
type Kind int

// Kinds, in the order they are checked. Exit codes are fixed: scripts rely
// on them (docs/central.md).
const (
	// Input: the file or the CA file cannot be read.
	Input Kind = iota + 1
	// Malformed: not a strict head, proof, consistency or forks document (JSON syntax, unknown,
	// missing or repeated members, wrong types, non-canonical numbers, hex,
	// base64 or PEM).
	Malformed
	// BadCA: the CA file holds no CA certificate.
	BadCA
	// Certificate: the head's certificate does not chain to the CA, was not
	// valid at signed_at, or is not an appliance certificate.
	Certificate
	// Appliance: the certificate names another appliance than the head.
	Appliance
	// HeadRule: the head breaks a rule of the format (identifiers,
	// event_count above last_sequence, an empty tree without the empty
	// root, signed_at before its day).
	HeadRule
	// Signature: the signature does not verify over the checkpoint body.
	Signature
	// Mismatch: the proof disagrees with its head (appliance, day,
	// tree_size and event_count, leaf_index range, sequence bounds); or a
	// fork is none: its heads are of different trees, of sizes or with a
	// stored root its kind of evidence does not allow, or they agree; or
	// a consistency proof's heads are of different trees, or its sizes or
	// last sequences are not theirs in order.
	Mismatch
	// Inclusion: the audit path does not lead from leaf_hash to the root;
	// or a fork's consistency proof does not lead from stored_root to
	// stored_head's root; or a consistency proof does not lead from
	// from_head's root to to_head's (or the heads are forked).
	Inclusion
	// LeafMismatch: the proof's leaf, or the canonical leaf given with
	// --leaf, is not the proven one (another hash, not a strict canonical
	// leaf, or naming another request, sequence, tenant or appliance), or
	// the proof carries no leaf and none is given.
	LeafMismatch
	// BodyMismatch: a bundle's request or response body does not hash to
	// its leaf's request_sha256 or response_sha256.
	BodyMismatch
	// Incomplete: a bundle's events are not exactly its head's tree's
	// leaves 0 to event_count-1 in order (an event dropped, added or
	// moved), or its uncovered events do not follow them.
	Incomplete
)

var kindNames = map[Kind]string{
	Input: "input", Malformed: "malformed", BadCA: "bad_ca", Certificate: "certificate",
	Appliance: "appliance_mismatch", HeadRule: "head_invalid", Signature: "signature",
	Mismatch: "proof_mismatch", Inclusion: "inclusion", LeafMismatch: "leaf_mismatch",
	BodyMismatch: "body_mismatch", Incomplete: "incomplete",
}

// String is the kind's code in a verdict, e.g. "signature".
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ExitCode is the exit status of `tollgate verify` for the kind: 0 is
// success, 1 an unexpected error, 2 a usage error, then 3 (input) to 14
// (incomplete) in the order of the constants.
func (k Kind) ExitCode() int { return int(k) + 2 }

// Error is a classified verification failure.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

func wrap(k Kind, err error) error { return &Error{Kind: k, Err: err} }

// KindOf returns the Kind of a verification error (0 when it is not one).
func KindOf(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return 0
}
