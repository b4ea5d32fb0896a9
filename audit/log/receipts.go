package log

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/receipt"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Receipts (docs/audit-format.md, "Receipts"). When the log has a signer,
// the committer signs one statement per batch, over the RFC 6962 root of
// the batch's receipt claims, before it writes the batch: the signed
// statement is journaled in the batch's first frame (version 4) and
// applied to the batches bucket, so a receipt can be served again after a
// restart or a replay. Each Append gets its receipt built from the batch's
// tree on its own goroutine; the committer pays one claim hash, one tree
// node and one signature per batch.

// ErrNoReceipt: the event was recorded without a receipt (before receipts,
// by a log without a signer, or in a batch a crash cut short before it was
// acknowledged).
var ErrNoReceipt = errors.New("audit log: no receipt for this event")

// bucketBatches holds each signed batch statement (batchRecord) under
// day|first sequence; bucketCerts the certificates that signed them under
// the SHA-256 of their DER.
var (
	bucketBatches = []byte("batches")
	bucketCerts   = []byte("certs")
)

// batchRecord is a signed batch statement as the journal and audit.db
// store it:
//
//	size (u32) | signed_at (u64, Unix seconds) | root (32 bytes)
//	| SHA-256 of the signing certificate's DER (32 bytes) | signature (DER, the rest)
//
// The appliance and day are the log's and the frame's, the first sequence
// the frame's (journal) or the key's (audit.db).
type batchRecord struct {
	size     uint64
	signedAt int64
	root     []byte
	certHash []byte
	sig      []byte
}

const (
	batchRecordFixed = 4 + 8 + 32 + 32
	// maxBatchRecord bounds a batch record: an ECDSA P-256 signature in
	// DER is at most 72 bytes, an Ed25519 one 64.
	maxBatchRecord = batchRecordFixed + 80
)

func (b batchRecord) encode() []byte {
	out := make([]byte, 0, batchRecordFixed+len(b.sig))
	out = binary.BigEndian.AppendUint32(out, uint32(b.size))
	out = binary.BigEndian.AppendUint64(out, uint64(b.signedAt))
	out = append(out, b.root...)
	out = append(out, b.certHash...)
	return append(out, b.sig...)
}

func decodeBatchRecord(v []byte) (batchRecord, error) {
	if len(v) <= batchRecordFixed || len(v) > maxBatchRecord {
		return batchRecord{}, fmt.Errorf("audit log: batch record of %d bytes", len(v))
	}
	be := binary.BigEndian
	return batchRecord{
		size: uint64(be.Uint32(v)), signedAt: int64(be.Uint64(v[4:])),
		root:     bytes.Clone(v[12:44]),
		certHash: bytes.Clone(v[44:76]),
		sig:      bytes.Clone(v[76:]),
	}, nil
}

// batchSigned is a journaled batch's tree and signed statement, shared by
// its appends, which build their receipts from it.
type batchSigned struct {
	batch  *receipt.Batch
	claims []receipt.Claim
}

// signBatch builds the tree of entries' claims and signs its statement. It
// returns nil, logging why, when it cannot sign (the certificate not valid
// now): the batch is then recorded without receipts rather than refused.
func (l *Log) signBatch(entries []entry, times []string) (*batchSigned, []byte) {
	app := l.opts.Signer
	if app == nil || len(entries) == 0 {
		return nil, nil
	}
	claims := make([]receipt.Claim, len(entries))
	hashes := make([][]byte, len(entries))
	slab := make([]byte, 0, sha256.Size*len(entries))
	for i := range entries {
		e := &entries[i]
		claims[i] = receipt.Claim{RequestID: string(e.requestID), TenantID: e.tenant,
			ApplianceID: l.opts.ApplianceID, Day: l.w.day, Sequence: e.seq, LeafIndex: e.leafIndex,
			Time: times[i], LeafHash: e.leafHash}
		slab = claims[i].AppendHash(slab)
		hashes[i] = slab[len(slab)-sha256.Size : len(slab) : len(slab)]
	}
	tree := receipt.NewTree(hashes)
	signed, err := receipt.Sign(receipt.Statement{Day: l.w.day, FirstSequence: entries[0].seq,
		Size: tree.Size(), Root: tree.Root()}, app, l.opts.Now())
	if err != nil {
		l.opts.Logger.Error("audit log: batch recorded without receipts", "events", len(entries), "err", err)
		return nil, nil
	}
	at, _ := receipt.ParseSignedAt(signed.SignedAt)
	rec := batchRecord{size: tree.Size(), signedAt: at.Unix(), root: tree.Root(),
		certHash: l.certHash[:], sig: signed.Signature}
	return &batchSigned{batch: receipt.NewBatch(tree, signed), claims: claims}, rec.encode()
}

// receiptOf returns the receipt of the index-th claim of a batch, nil
// when the batch has none.
func (b *batchSigned) receiptOf(index int) *receipt.Receipt {
	if b == nil {
		return nil
	}
	r := b.batch.Receipt(b.claims[index], uint64(index))
	return &r
}

// headerOf returns the x-tollgate-receipt value of the index-th claim of a
// batch, "" when the batch has none.
func (b *batchSigned) headerOf(index int) string {
	if b == nil {
		return ""
	}
	return b.batch.HeaderOf(b.claims[index], uint64(index))
}

// storeCert records the signer's certificate in audit.db at open, before
// any batch it signs is journaled, and returns its hash.
func storeCert(tx *bolt.Tx, app *fleet.Appliance) ([sha256.Size]byte, error) {
	h := sha256.Sum256(app.Cert.Raw)
	if err := tx.Bucket(bucketCerts).Put(h[:], app.CertPEM); err != nil {
		return h, fmt.Errorf("audit log: store the appliance certificate: %w", err)
	}
	return h, nil
}

// Receipt returns the receipt of a request id's event, of tenant when set
// (another tenant's event is indistinguishable from none). It fails with
// ErrNotFound for no such event and ErrNoReceipt for an event recorded
// without one.
func (l *Log) Receipt(tenant, requestID string) (receipt.Receipt, error) {
	if err := ids.CheckRequest(requestID); err != nil {
		return receipt.Receipt{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := l.apply.caughtUp(); err != nil {
		return receipt.Receipt{}, err
	}
	var out receipt.Receipt
	err := l.db.View(func(tx *bolt.Tx) error {
		r, _, err := readEvent(tx, requestID)
		if tenant != "" && (errors.Is(err, ErrNotFound) || err == nil && r.Leaf.TenantID != tenant) {
			return fmt.Errorf("%w: no event %s for tenant %s", ErrNotFound, requestID, tenant)
		}
		if err != nil {
			return err
		}
		out, err = l.storedReceipt(tx, r)
		return err
	})
	return out, err
}

// storedReceipt rebuilds an event's receipt from its batch's statement
// and the batch's events, checking that they give the signed root.
func (l *Log) storedReceipt(tx *bolt.Tx, r Record) (receipt.Receipt, error) {
	seq := r.Leaf.Sequence
	c := tx.Bucket(bucketBatches).Cursor()
	k, v := c.Seek(eventKey(r.Day, seq))
	if k == nil || !bytes.Equal(k, eventKey(r.Day, seq)) {
		k, v = c.Prev()
	}
	if k == nil || len(k) != dayLen+8 || string(k[:dayLen]) != r.Day {
		return receipt.Receipt{}, fmt.Errorf("%w: %s", ErrNoReceipt, r.Leaf.RequestID)
	}
	first := binary.BigEndian.Uint64(k[dayLen:])
	b, err := decodeBatchRecord(v)
	if err != nil {
		return receipt.Receipt{}, err
	}
	if seq < first || seq-first >= b.size {
		return receipt.Receipt{}, fmt.Errorf("%w: %s", ErrNoReceipt, r.Leaf.RequestID)
	}
	certPEM := tx.Bucket(bucketCerts).Get(b.certHash)
	if certPEM == nil {
		return receipt.Receipt{}, fmt.Errorf("audit log: certificate %x of the batch of %s/%d not stored", b.certHash, r.Day, first)
	}
	events := tx.Bucket(bucketEvents)
	hashes := make([][]byte, b.size)
	var claim receipt.Claim
	for i := range b.size {
		ev, err := decodeEventRecord(events.Get(eventKey(r.Day, first+i)))
		if err != nil {
			// A batch a crash cut short: its later events were never
			// journaled, and never acknowledged.
			return receipt.Receipt{}, fmt.Errorf("%w: %s (its batch is incomplete)", ErrNoReceipt, r.Leaf.RequestID)
		}
		lf, err := leaf.Parse(ev.leaf)
		if err != nil {
			return receipt.Receipt{}, fmt.Errorf("audit log: event %s/%d: %w", r.Day, first+i, err)
		}
		ci := receipt.Claim{RequestID: lf.RequestID, TenantID: lf.TenantID, ApplianceID: lf.ApplianceID,
			Day: r.Day, Sequence: lf.Sequence, LeafIndex: ev.leafIndex, Time: lf.Time, LeafHash: leaf.Hash(ev.leaf)}
		hashes[i] = ci.Hash()
		if first+i == seq {
			claim = ci
		}
	}
	tree := receipt.NewTree(hashes)
	if !bytes.Equal(tree.Root(), b.root) {
		// The events under these sequences are not the batch signed:
		// one cut short by a crash, whose sequences later events took.
		return receipt.Receipt{}, fmt.Errorf("%w: %s (its batch is incomplete)", ErrNoReceipt, r.Leaf.RequestID)
	}
	signed := receipt.Signed{
		Statement: receipt.Statement{ApplianceID: l.opts.ApplianceID, Day: r.Day, FirstSequence: first,
			Size: b.size, Root: b.root, SignedAt: head.FormatSignedAt(time.Unix(b.signedAt, 0))},
		Signature: b.sig, Certificate: certPEM,
	}
	return receipt.New(claim, seq-first, tree, signed), nil
}
