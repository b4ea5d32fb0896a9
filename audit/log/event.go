package log

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// Event is what the edge records for one request with an authenticated key,
// whatever its outcome.
type Event struct {
	RequestID string
	TenantID  string
	KeyID     string
	// Time is when the request was received; zero means now.
	Time     time.Time
	Endpoint string
	Model    string
	// Status is the HTTP status sent.
	Status           int
	PromptTokens     int64
	CompletionTokens int64
	// PolicyDecisionID is dec_<id>, or empty when no decision was made.
	PolicyDecisionID string
	// RequestBody and ResponseBody are the bodies as received and as sent
	// (for a stream, the concatenated SSE bytes). The log copies them.
	RequestBody  []byte
	ResponseBody []byte
}

// Receipt tells where an appended event landed.
type Receipt struct {
	// Day is the UTC day of the tree the event joined.
	Day string
	// Sequence is the appliance-wide sequence number within Day, from 1.
	Sequence uint64
	// LeafIndex is the event's index in its tenant's tree of Day.
	LeafIndex uint64
	// LeafHash is the RFC 6962 leaf hash of the event's canonical leaf.
	LeafHash []byte
	// signed is the event's signed batch and index there, nil when the
	// log has no signer or could not sign (receipts.go): its receipt is
	// built on demand (Signed, Header), since a streamed reply, whose
	// receipt is fetched later, never sends it.
	signed *batchSigned
	index  int
}

// Signed returns the event's signed receipt, nil when the log has no
// signer or could not sign (receipts.go).
func (r Receipt) Signed() *receipt.Receipt { return r.signed.receiptOf(r.index) }

// Header returns the event's signed receipt as the x-tollgate-receipt
// header carries it: unpadded base64url of its JSON document
// (receipt.Batch.HeaderOf), built by each call; "" without a receipt.
func (r Receipt) Header() string { return r.signed.headerOf(r.index) }

// Record is a stored event, as Event returns it.
type Record struct {
	Day       string
	LeafIndex uint64
	Leaf      leaf.Leaf
	// LeafBytes are the canonical bytes the tree commits to.
	LeafBytes []byte
	LeafHash  []byte
	// RequestBody and ResponseBody are the bodies as received and sent
	// (decompressed), nil once pruned (BodiesPruned), or when BodiesLost:
	// the stored bytes do not match the leaf's digests or cannot be read
	// as bodies, which a power loss during an Append that never returned
	// can cause, or damage on the disk since (the log warns of it).
	RequestBody  []byte
	ResponseBody []byte
	BodiesPruned bool
	BodiesLost   bool
}

// pending is one Append on its way through the committer.
type pending struct {
	tenant    string
	requestID []byte
	tpl       leaf.Template
	// stored is the request body then the response body as the journal
	// stores them (codec); reqLen and respLen are their lengths as
	// received and sent.
	stored          []byte
	codec           byte
	reqLen, respLen int
	// time is the leaf's time, for the receipt's claim.
	time    string
	done    chan struct{}
	receipt Receipt
	// batch and batchIndex are the signed batch the committer put the
	// append in and its place there; Append builds its receipt from them.
	batch      *batchSigned
	batchIndex int
	err        error
}

// size is what the pending append weighs in a batch.
func (p *pending) size() int { return len(p.stored) + p.tpl.Size() }

// prepare validates ev and does the per-event work that does not need a
// sequence (hashing and compressing bodies, RFC 8785), on the caller's
// goroutine: appends compress in parallel, and the committer only copies
// their bytes into the batch.
func (l *Log) prepare(ev Event) (*pending, error) {
	at := ev.Time
	if at.IsZero() {
		at = l.opts.Now()
	}
	atText := leaf.FormatTime(at)
	salt, err := leaf.NewSalt(nil)
	if err != nil {
		return nil, err
	}
	// Hash the log's own copy, so that the stored bodies match the leaf;
	// compressBodies keeps what it stores, so the copy is reused.
	scratch := getScratch(len(ev.RequestBody) + len(ev.ResponseBody))
	defer putScratch(scratch)
	bodies := append(append((*scratch)[:0], ev.RequestBody...), ev.ResponseBody...)
	req, resp := bodies[:len(ev.RequestBody)], bodies[len(ev.RequestBody):]
	tpl, err := leaf.NewTemplate(leaf.Leaf{
		Schema:           leaf.Schema,
		RequestID:        ev.RequestID,
		TenantID:         ev.TenantID,
		ApplianceID:      l.opts.ApplianceID,
		KeyID:            ev.KeyID,
		Time:             atText,
		Endpoint:         ev.Endpoint,
		Model:            ev.Model,
		Status:           ev.Status,
		PromptTokens:     ev.PromptTokens,
		CompletionTokens: ev.CompletionTokens,
		PolicyDecisionID: ev.PolicyDecisionID,
		RequestSHA256:    leaf.BodyHash(req),
		ResponseSHA256:   leaf.BodyHash(resp),
		Salt:             salt,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: event %q: %w", ErrInvalid, ev.RequestID, err)
	}
	// Bounded as sent, not as stored: a read decompresses the bodies to
	// this size (codec.go).
	if n := recordLen(ev.TenantID, []byte(ev.RequestID), nil, len(bodies)) + tpl.Size(); n > maxRecord {
		return nil, fmt.Errorf("%w: event %q of %d bytes exceeds %d", ErrInvalid, ev.RequestID, n, maxRecord)
	}
	codec, stored := compressBodies(bodies)
	return &pending{
		tenant:    ev.TenantID,
		requestID: []byte(ev.RequestID),
		tpl:       tpl,
		stored:    stored,
		codec:     codec,
		reqLen:    len(req),
		respLen:   len(resp),
		time:      atText,
		done:      make(chan struct{}),
	}, nil
}
