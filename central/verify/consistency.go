package verify

import (
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// ConsistencyDoc is a consistency proof as the central plane serves it
// (GET /v1/tenants/{tenant_id}/audit/consistency): two signed heads of
// one tree and the RFC 6962 consistency proof from the smaller to the
// larger.
type ConsistencyDoc struct {
	ApplianceID string
	Day         string
	FromSize    uint64
	ToSize      uint64
	Proof       [][]byte
	FromHead    head.Head
	ToHead      head.Head
}

// ParseConsistency parses a consistency proof document.
func ParseConsistency(data []byte) (ConsistencyDoc, error) {
	r, err := newReader(data)
	if err != nil {
		return ConsistencyDoc{}, err
	}
	var c ConsistencyDoc
	var hashes []string
	err = r.object("consistency", map[string]func(*reader) error{
		"appliance_id":      func(r *reader) error { return r.str(&c.ApplianceID) },
		"day":               func(r *reader) error { return r.str(&c.Day) },
		"from_size":         func(r *reader) error { return r.uint(&c.FromSize) },
		"to_size":           func(r *reader) error { return r.uint(&c.ToSize) },
		"consistency_proof": func(r *reader) error { return r.strs(&hashes) },
		"from_head": func(r *reader) error {
			var err error
			c.FromHead, err = readHead(r, "from_head")
			return err
		},
		"to_head": func(r *reader) error {
			var err error
			c.ToHead, err = readHead(r, "to_head")
			return err
		},
	})
	if err != nil {
		return ConsistencyDoc{}, err
	}
	if err := r.end(); err != nil {
		return ConsistencyDoc{}, err
	}
	if len(hashes) > maxConsistencyHashes {
		return ConsistencyDoc{}, fail(Malformed, "consistency.consistency_proof: %d hashes, at most %d", len(hashes), maxConsistencyHashes)
	}
	c.Proof = make([][]byte, len(hashes))
	for i, s := range hashes {
		if c.Proof[i], err = decodeHash(s); err != nil {
			return ConsistencyDoc{}, wrap(Malformed, fmt.Errorf("consistency.consistency_proof[%d]: %w", i, err))
		}
	}
	return c, nil
}

// Consistency verifies a consistency proof: both heads on their own
// (Head; a failure names the head), that they are of one tree and the
// document's members agree with them (Mismatch: appliance and day,
// from_size and to_size their event counts, the smaller first, a
// last_sequence that grows with the tree), then the RFC 6962 consistency
// proof from from_head's root at from_size leaves to to_head's at
// to_size (Inclusion). Two heads of one tree whose roots no proof can
// join (a fork: the appliance's key signed two views of the tree) fail
// there.
func Consistency(c ConsistencyDoc, ca *x509.Certificate) error {
	if err := ids.CheckAppliance(c.ApplianceID); err != nil {
		return wrap(Malformed, err)
	}
	if _, err := ids.ParseDay(c.Day); err != nil {
		return wrap(Malformed, err)
	}
	from, to := c.FromHead, c.ToHead
	for _, h := range []struct {
		name string
		h    head.Head
	}{{"from_head", from}, {"to_head", to}} {
		if err := Head(h.h, ca); err != nil {
			if e, ok := errors.AsType[*Error](err); ok {
				return &Error{Kind: e.Kind, Err: fmt.Errorf("%s: %w", h.name, e.Err)}
			}
			return err
		}
	}
	switch {
	case from.TenantID != to.TenantID || from.ApplianceID != to.ApplianceID || from.Day != to.Day:
		return fail(Mismatch, "heads of different trees: from_head of %s/%s/%s, to_head of %s/%s/%s",
			from.TenantID, from.ApplianceID, from.Day, to.TenantID, to.ApplianceID, to.Day)
	case c.ApplianceID != from.ApplianceID || c.Day != from.Day:
		return fail(Mismatch, "a proof of %s/%s with heads of %s/%s", c.ApplianceID, c.Day, from.ApplianceID, from.Day)
	case c.FromSize != from.EventCount || c.ToSize != to.EventCount:
		return fail(Mismatch, "sizes %d and %d, heads of %d and %d events", c.FromSize, c.ToSize, from.EventCount, to.EventCount)
	case from.EventCount > to.EventCount:
		return fail(Mismatch, "from_head of %d events is larger than to_head of %d", from.EventCount, to.EventCount)
	case from.EventCount == to.EventCount && from.LastSequence != to.LastSequence,
		from.EventCount < to.EventCount && from.LastSequence >= to.LastSequence:
		// Each leaf's sequence is above the one before: a tree's
		// last_sequence grows with it, and stays with its size.
		return fail(Mismatch, "last_sequence %d at %d events, then %d at %d", from.LastSequence, from.EventCount, to.LastSequence, to.EventCount)
	}
	r1, _ := from.Root()
	r2, _ := to.Root()
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, from.EventCount, to.EventCount, c.Proof, r1, r2); err != nil {
		if m, ok := errors.AsType[proof.RootMismatchError](err); ok {
			// Its own message prints the roots as lists of bytes.
			err = fmt.Errorf("it leads to root %x where %x is expected", m.CalculatedRoot, m.ExpectedRoot)
		}
		return wrap(Inclusion, fmt.Errorf("consistency proof from from_head's root at %d events to to_head's at %d: %w", from.EventCount, to.EventCount, err))
	}
	return nil
}

// ConsistencyDocument parses and verifies a consistency proof document
// (ParseConsistency, Consistency).
func ConsistencyDocument(data []byte, ca *x509.Certificate) (ConsistencyDoc, error) {
	c, err := ParseConsistency(data)
	if err != nil {
		return ConsistencyDoc{}, err
	}
	if err := Consistency(c, ca); err != nil {
		return ConsistencyDoc{}, err
	}
	return c, nil
}
