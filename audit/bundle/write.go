// Package bundle writes the evidence bundle of one tenant's day
// (docs/audit-format.md, "The evidence bundle"): one JSON document with
// the day's latest signed head, every event of the tenant that day in
// leaf order with its canonical leaf, bodies, inclusion proof and
// receipt, and the events not yet covered by a head. It streams: one
// event is in memory at a time.
package bundle

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// Schema is the bundle document's schema member.
const Schema = "tollgate-audit-bundle/v1"

// Bodies states of an event in a bundle.
const (
	BodiesPresent = "present"
	BodiesPruned  = "pruned"
	BodiesLost    = "lost"
)

// window is how many sequences one read of the tree's leaves spans, which
// bounds the leaves held at once.
const window = 4096

// Source is what a bundle is written from: the appliance's audit log.
type Source interface {
	Head(tenant, day string) (head.Head, error)
	Leaves(tenant, day string, afterSeq, toSeq uint64) ([]log.LeafRef, error)
	TenantEvent(tenant, requestID string) (log.Record, error)
	InclusionProof(tenant, day, requestID string, treeSize uint64) (log.InclusionProof, error)
	Receipt(tenant, requestID string) (receipt.Receipt, error)
}

// ErrNoHead: the tenant's tree of the day has no signed head yet (no
// event that day, or none signed yet).
var ErrNoHead = errors.New("no signed head of this tenant's day")

// Write writes the bundle of tenant's day from src to w, stamped with now.
// The head is the tree's latest when Write starts; events appended since
// are written as uncovered.
func Write(w io.Writer, src Source, tenant, day string, now time.Time) error {
	h, err := src.Head(tenant, day)
	if errors.Is(err, log.ErrNotFound) {
		return fmt.Errorf("%w: %s/%s (the appliance signs a head every --head-interval)", ErrNoHead, tenant, day)
	}
	if err != nil {
		return fmt.Errorf("bundle: head: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	put := func(s string) { _, _ = bw.WriteString(s) }
	putJSON := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	}
	put(`{"schema":"` + Schema + `","tenant_id":`)
	_ = putJSON(tenant)
	put(`,"appliance_id":`)
	_ = putJSON(h.ApplianceID)
	put(`,"day":`)
	_ = putJSON(day)
	put(`,"exported_at":`)
	_ = putJSON(now.UTC().Format(time.RFC3339))
	put(`,"head":`)
	if err := putJSON(h); err != nil {
		return err
	}
	put(`,"events":[`)
	var after uint64
	var n uint64
	for after < h.LastSequence {
		refs, err := src.Leaves(tenant, day, after, min(after+window, h.LastSequence))
		if err != nil {
			return fmt.Errorf("bundle: leaves: %w", err)
		}
		for _, ref := range refs {
			if n > 0 {
				put(",")
			}
			p, err := src.InclusionProof(tenant, day, ref.RequestID, h.EventCount)
			if err != nil {
				return fmt.Errorf("bundle: proof of %s: %w", ref.RequestID, err)
			}
			if err := writeEvent(bw, src, tenant, ref, p.Hashes, true); err != nil {
				return err
			}
			n++
		}
		after = min(after+window, h.LastSequence)
	}
	if n != h.EventCount {
		return fmt.Errorf("bundle: the head covers %d events, the tree gave %d", h.EventCount, n)
	}
	put(`],"uncovered":[`)
	// Events since the head: at most a head interval's worth.
	refs, err := src.Leaves(tenant, day, h.LastSequence, math.MaxUint64)
	if err != nil {
		return fmt.Errorf("bundle: leaves: %w", err)
	}
	for i, ref := range refs {
		if i > 0 {
			put(",")
		}
		if err := writeEvent(bw, src, tenant, ref, nil, false); err != nil {
			return err
		}
	}
	put("]}\n")
	return bw.Flush()
}

// writeEvent writes one event object; path is its audit path when it is
// covered by the head.
func writeEvent(bw *bufio.Writer, src Source, tenant string, ref log.LeafRef, path [][]byte, covered bool) error {
	rec, err := src.TenantEvent(tenant, ref.RequestID)
	if err != nil {
		return fmt.Errorf("bundle: event %s: %w", ref.RequestID, err)
	}
	rc, err := src.Receipt(tenant, ref.RequestID)
	hasReceipt := err == nil
	if err != nil && !errors.Is(err, log.ErrNoReceipt) {
		return fmt.Errorf("bundle: receipt of %s: %w", ref.RequestID, err)
	}
	leafJSON, err := json.Marshal(string(ref.Leaf))
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, `{"leaf":%s,"leaf_index":%d,`, leafJSON, ref.LeafIndex)
	if covered {
		_, _ = bw.WriteString(`"audit_path":[`)
		for i, h := range path {
			if i > 0 {
				_ = bw.WriteByte(',')
			}
			_, _ = bw.WriteString(`"` + hex.EncodeToString(h) + `"`)
		}
		_, _ = bw.WriteString(`],`)
	}
	state := BodiesPresent
	switch {
	case rec.BodiesPruned:
		state = BodiesPruned
	case rec.BodiesLost:
		state = BodiesLost
	}
	_, _ = bw.WriteString(`"bodies":"` + state + `","request_body":"`)
	if err := writeBase64(bw, rec.RequestBody); err != nil {
		return err
	}
	_, _ = bw.WriteString(`","response_body":"`)
	if err := writeBase64(bw, rec.ResponseBody); err != nil {
		return err
	}
	_ = bw.WriteByte('"')
	if hasReceipt {
		b, err := json.Marshal(rc)
		if err != nil {
			return err
		}
		_, _ = bw.WriteString(`,"receipt":`)
		_, _ = bw.Write(b)
	}
	return bw.WriteByte('}')
}

func writeBase64(w io.Writer, b []byte) error {
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := enc.Write(b); err != nil {
		return err
	}
	return enc.Close()
}
