package verify

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// BundleSchema is the schema member of an evidence bundle.
const BundleSchema = "tollgate-audit-bundle/v1"

// secondsUTC is the form of exported_at, as of a head's signed_at.
const secondsUTC = "2006-01-02T15:04:05Z"

// maxBundleEvents bounds the events a bundle may hold (a day's tree
// holds fewer than 2^32 leaves).
const maxBundleEvents = 1 << 32

// BundleSummary is what a verified bundle holds.
type BundleSummary struct {
	TenantID    string
	ApplianceID string
	Day         string
	// Head is the bundle's signed head.
	Head head.Head
	// Events are the events the head covers; Uncovered those after it.
	Events    uint64
	Uncovered uint64
	// Receipts counts the events (covered or not) with a verified receipt.
	Receipts uint64
	// BodiesPresent, BodiesPruned and BodiesLost count the events by the
	// state of their bodies.
	BodiesPresent, BodiesPruned, BodiesLost uint64
	// Models and Statuses count the events by model and HTTP status.
	Models   map[string]uint64
	Statuses map[int]uint64
}

// Bundle reads an evidence bundle (docs/audit-format.md, "The evidence
// bundle") from in, in one pass and one event in memory at a time, and
// verifies every part against the fleet CA certificate: the head, each
// leaf (strict, hashing to a leaf proven under the head, naming the
// bundle's tenant and appliance), each inclusion proof, each body against
// its leaf's digest, that the events are exactly the tree's leaves in
// order, and each receipt and that it promised that leaf. It returns the
// first failure, naming the event.
func Bundle(in io.Reader, ca *x509.Certificate) (BundleSummary, error) {
	r := newStreamReader(in)
	s := BundleSummary{Models: map[string]uint64{}, Statuses: map[int]uint64{}}
	if err := r.delim('{'); err != nil {
		return s, err
	}
	var schema, exportedAt string
	for _, m := range []struct {
		name string
		dst  *string
	}{{"schema", &schema}, {"tenant_id", &s.TenantID}, {"appliance_id", &s.ApplianceID}, {"day", &s.Day}, {"exported_at", &exportedAt}} {
		if err := r.member("bundle", m.name); err != nil {
			return s, err
		}
		if err := r.str(m.dst); err != nil {
			return s, prefix("bundle."+m.name+": ", err)
		}
	}
	if schema != BundleSchema {
		return s, fail(Malformed, "bundle.schema is %q, not %q", schema, BundleSchema)
	}
	if at, err := time.Parse(secondsUTC, exportedAt); err != nil || at.Format(secondsUTC) != exportedAt {
		return s, fail(Malformed, "bundle.exported_at %q is not RFC 3339 UTC in seconds with Z", exportedAt)
	}
	if err := r.member("bundle", "head"); err != nil {
		return s, err
	}
	h, err := readHead(r, "bundle.head")
	if err != nil {
		return s, err
	}
	if err := Head(h, ca); err != nil {
		return s, prefix("bundle.head: ", err)
	}
	s.Head = h
	if s.TenantID != h.TenantID || s.ApplianceID != h.ApplianceID || s.Day != h.Day {
		return s, fail(Mismatch, "the bundle is of %s/%s/%s, its head of %s/%s/%s",
			s.TenantID, s.ApplianceID, s.Day, h.TenantID, h.ApplianceID, h.Day)
	}
	v := bundleVerifier{ca: ca, head: h, sum: &s}
	if err := r.member("bundle", "events"); err != nil {
		return s, err
	}
	if err := v.events(r, true); err != nil {
		return s, err
	}
	if s.Events != h.EventCount {
		return s, fail(Incomplete, "the head covers %d events, the bundle holds %d", h.EventCount, s.Events)
	}
	if err := r.member("bundle", "uncovered"); err != nil {
		return s, err
	}
	if err := v.events(r, false); err != nil {
		return s, err
	}
	if err := r.delim('}'); err != nil {
		return s, err
	}
	return s, r.end()
}

// bundleVerifier checks a bundle's events in order.
type bundleVerifier struct {
	ca      *x509.Certificate
	head    head.Head
	sum     *BundleSummary
	lastSeq uint64
}

// bundleEvent is one event of a bundle as read.
type bundleEvent struct {
	leaf       []byte
	leafIndex  uint64
	auditPath  [][]byte
	bodies     string
	request    string
	response   string
	receipt    receipt.Receipt
	hasReceipt bool
}

// events reads and checks the events or uncovered array.
func (v *bundleVerifier) events(r *reader, covered bool) error {
	what := "events"
	if !covered {
		what = "uncovered"
	}
	if err := r.delim('['); err != nil {
		return prefix("bundle."+what+": ", err)
	}
	for i := uint64(0); r.dec.More(); i++ {
		if i >= maxBundleEvents {
			return fail(Malformed, "bundle.%s: more than %d events", what, uint64(maxBundleEvents))
		}
		where := fmt.Sprintf("bundle.%s[%d]", what, i)
		ev, err := readBundleEvent(r, where, covered)
		if err != nil {
			return err
		}
		if err := v.event(ev, i, covered); err != nil {
			return prefix(where+": ", err)
		}
	}
	return r.delim(']')
}

func readBundleEvent(r *reader, where string, covered bool) (bundleEvent, error) {
	var ev bundleEvent
	fields := map[string]func(*reader) error{
		"leaf":          func(r *reader) error { return readBundleLeaf(r, &ev.leaf) },
		"leaf_index":    func(r *reader) error { return r.uint(&ev.leafIndex) },
		"bodies":        func(r *reader) error { return r.str(&ev.bodies) },
		"request_body":  func(r *reader) error { return r.str(&ev.request) },
		"response_body": func(r *reader) error { return r.str(&ev.response) },
		"receipt": func(r *reader) error {
			var err error
			ev.receipt, err = readReceipt(r)
			ev.hasReceipt = err == nil
			return err
		},
	}
	if covered {
		fields["audit_path"] = func(r *reader) error {
			var path []string
			if err := r.strs(&path); err != nil {
				return err
			}
			ev.auditPath = make([][]byte, len(path))
			for j, s := range path {
				var err error
				if ev.auditPath[j], err = decodeHash(s); err != nil {
					return fail(Malformed, "[%d]: %v", j, err)
				}
			}
			return nil
		}
	}
	if err := r.object(where, fields, "receipt"); err != nil {
		return ev, err
	}
	return ev, nil
}

// readBundleLeaf reads an event's leaf: a non-empty string of at most
// maxLeafBytes, its bytes the canonical leaf.
func readBundleLeaf(r *reader, out *[]byte) error {
	if err := readLeaf(r, out); err != nil {
		return err
	}
	if *out == nil {
		return fail(Malformed, "the leaf is empty")
	}
	return nil
}

// event checks the i-th event of the events (covered) or uncovered array.
func (v *bundleVerifier) event(ev bundleEvent, i uint64, covered bool) error {
	h := v.head
	l, err := leaf.Parse(ev.leaf)
	if err != nil {
		return wrap(LeafMismatch, fmt.Errorf("the leaf: %w", err))
	}
	id := l.RequestID
	want := i
	if !covered {
		want = h.EventCount + i
	}
	switch {
	case ev.leafIndex != want:
		return fail(Incomplete, "%s is at leaf_index %d where leaf %d belongs: an event is missing, added or moved", id, ev.leafIndex, want)
	case l.Sequence <= v.lastSeq:
		return fail(Incomplete, "%s has sequence %d, not after the previous event's %d", id, l.Sequence, v.lastSeq)
	case !covered && l.Sequence <= h.LastSequence:
		return fail(Incomplete, "%s has sequence %d, within the head's last_sequence %d, yet is not covered", id, l.Sequence, h.LastSequence)
	}
	v.lastSeq = l.Sequence
	p := ProofDoc{
		ApplianceID: h.ApplianceID, Day: h.Day, RequestID: id, Sequence: l.Sequence,
		LeafIndex: ev.leafIndex, TreeSize: h.EventCount, LeafHash: leaf.Hash(ev.leaf), Head: h, Leaf: ev.leaf,
	}
	if covered {
		p.AuditPath = ev.auditPath
		if err := proofUnderHead(p); err != nil {
			return prefix(id+": ", err)
		}
	}
	if err := leafNames(l, p); err != nil {
		return prefix(id+": ", err)
	}
	if err := v.bodies(ev, l); err != nil {
		return prefix(id+": ", err)
	}
	if ev.hasReceipt {
		if err := Receipt(ev.receipt, v.ca); err != nil {
			return prefix(id+": the receipt: ", err)
		}
		if err := ProofOfReceipt(p, ev.receipt); err != nil {
			return prefix(id+": the receipt: ", err)
		}
		if ev.receipt.Time != l.Time {
			return fail(LeafMismatch, "%s: the receipt's time is %s, the leaf's %s", id, ev.receipt.Time, l.Time)
		}
		v.sum.Receipts++
	}
	if covered {
		v.sum.Events++
	} else {
		v.sum.Uncovered++
	}
	v.sum.Models[l.Model]++
	v.sum.Statuses[l.Status]++
	return nil
}

// bodies checks an event's bodies against its leaf's digests.
func (v *bundleVerifier) bodies(ev bundleEvent, l leaf.Leaf) error {
	switch ev.bodies {
	case "present":
		for _, b := range []struct{ name, text, digest string }{
			{"request_body", ev.request, l.RequestSHA256}, {"response_body", ev.response, l.ResponseSHA256},
		} {
			raw, err := base64.StdEncoding.Strict().DecodeString(b.text)
			if err != nil || base64.StdEncoding.EncodeToString(raw) != b.text {
				return fail(Malformed, "%s is not canonical standard base64", b.name)
			}
			sum := sha256.Sum256(raw)
			if got := hex.EncodeToString(sum[:]); got != b.digest {
				return fail(BodyMismatch, "%s hashes to %s, the leaf's digest is %s", b.name, got, b.digest)
			}
		}
		v.sum.BodiesPresent++
	case "pruned", "lost":
		if ev.request != "" || ev.response != "" {
			return fail(Malformed, "bodies %q with a body", ev.bodies)
		}
		if ev.bodies == "pruned" {
			v.sum.BodiesPruned++
		} else {
			v.sum.BodiesLost++
		}
	default:
		return fail(Malformed, "bodies is %q, not present, pruned or lost", ev.bodies)
	}
	return nil
}
