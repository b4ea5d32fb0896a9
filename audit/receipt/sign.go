package receipt

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Signed is a signed batch statement.
type Signed struct {
	Statement
	// Signature is by the certificate's key (fleet.Sign): Ed25519, 64
	// bytes, or ECDSA P-256, ASN.1 DER. Certificate is the signer's PEM.
	Signature   []byte
	Certificate []byte
}

// Sign signs a statement for app at the instant at (truncated to the
// second): it sets the statement's appliance and signed_at. It refuses an
// instant outside the certificate's validity, when no receipt of the batch
// would verify.
func Sign(s Statement, app *fleet.Appliance, at time.Time) (Signed, error) {
	if app == nil || app.Key == nil || app.Cert == nil {
		return Signed{}, errors.New("receipt: no appliance certificate and key to sign with")
	}
	s.ApplianceID = app.ID
	s.SignedAt = head.FormatSignedAt(at)
	if t, _ := ParseSignedAt(s.SignedAt); t.Before(app.Cert.NotBefore) || t.After(app.Cert.NotAfter) {
		return Signed{}, fmt.Errorf("receipt: signed_at %s outside the validity of the certificate of %s", s.SignedAt, app.ID)
	}
	sig, err := app.Sign(s.Body())
	if err != nil {
		return Signed{}, fmt.Errorf("receipt: sign: %w", err)
	}
	return Signed{Statement: s, Signature: sig, Certificate: app.CertPEM}, nil
}

// New returns the receipt of claim c, the claim at index i of the batch
// whose tree is t and whose signed statement is s.
func New(c Claim, i uint64, t *Tree, s Signed) Receipt {
	return NewBatch(t, s).Receipt(c, i)
}

// Batch makes the receipts of one signed batch, its members encoded once.
type Batch struct {
	tree   *Tree
	shared Receipt // the batch's members, encoded
	header HeaderEncoder
}

// NewBatch returns the maker of the receipts of the batch whose tree is t
// and whose signed statement is s.
func NewBatch(t *Tree, s Signed) *Batch {
	return &Batch{tree: t, shared: Receipt{Schema: Schema, BatchSize: t.Size(), BatchRoot: hex.EncodeToString(t.Root()),
		SignedAt: s.SignedAt, Signature: base64.StdEncoding.EncodeToString(s.Signature),
		Certificate: string(s.Certificate)}}
}

// Receipt returns the receipt of claim c, at index i of the batch.
func (b *Batch) Receipt(c Claim, i uint64) Receipt {
	path := b.tree.Path(i)
	hexPath := make([]string, len(path))
	for j, h := range path {
		hexPath[j] = hex.EncodeToString(h)
	}
	r := b.shared
	r.RequestID, r.TenantID, r.ApplianceID, r.Day = c.RequestID, c.TenantID, c.ApplianceID, c.Day
	r.Sequence, r.LeafIndex, r.Time, r.LeafHash = c.Sequence, c.LeafIndex, c.Time, hex.EncodeToString(c.LeafHash)
	r.BatchIndex, r.BatchPath = i, hexPath
	return r
}

// Header is the x-tollgate-receipt value of r, a receipt of the batch
// (HeaderEncoder).
func (b *Batch) Header(r *Receipt) string { return b.header.Value(r) }

// HeaderOf is the x-tollgate-receipt value of the receipt of claim c, at
// index i of the batch: the same bytes as Header(&Receipt(c, i)), written
// from the claim and the tree straight into one buffer, without the
// receipt's strings. Its only allocation is the value itself; the batch's
// members are encoded once, by the first call.
func (b *Batch) HeaderOf(c Claim, i uint64) string {
	tail := b.header.tailOf(&b.shared)
	var scratch [scratchSize]byte
	return joinHeader(b.appendHeadOf(scratch[:0], c, i), tail)
}

// Checked is a receipt whose members were checked for form and for the
// format's rules (Check), decoded.
type Checked struct {
	Claim     Claim
	Statement Statement
	Path      [][]byte
	SignedAt  time.Time
	Signature []byte
	// CertificateDER is the certificate's DER, not yet verified.
	CertificateDER []byte
}

// Check checks every member of r for form and the format's rules, without
// the certificate, the path or the signature: the schema, identifiers,
// day and times; leaf_index below sequence; batch_index below batch_size
// (at most MaxBatchSize) and below sequence; signed_at not before the
// day; hashes of 32 bytes in lowercase hex; the signature in canonical
// standard base64; the certificate exactly one canonical CERTIFICATE PEM
// block.
func Check(r Receipt) (Checked, error) {
	c, err := r.Claim()
	if err != nil {
		return Checked{}, err
	}
	at, err := ParseSignedAt(r.SignedAt)
	if err != nil {
		return Checked{}, err
	}
	start, _ := ids.ParseDay(r.Day) // checked by Claim
	if at.Before(start) {
		return Checked{}, fmt.Errorf("receipt: signed_at %s is before its day %s", r.SignedAt, r.Day)
	}
	if r.BatchSize < 1 || r.BatchSize > MaxBatchSize {
		return Checked{}, fmt.Errorf("receipt: batch_size %d out of range [1, %d]", r.BatchSize, MaxBatchSize)
	}
	if r.BatchIndex >= r.BatchSize {
		return Checked{}, fmt.Errorf("receipt: batch_index %d is not below batch_size %d", r.BatchIndex, r.BatchSize)
	}
	// The batch's claims have consecutive sequences from its first.
	if r.BatchIndex >= r.Sequence {
		return Checked{}, fmt.Errorf("receipt: batch_index %d is not below sequence %d", r.BatchIndex, r.Sequence)
	}
	root, err := hash32("batch_root", r.BatchRoot)
	if err != nil {
		return Checked{}, err
	}
	if len(r.BatchPath) > maxPath {
		return Checked{}, fmt.Errorf("receipt: batch_path of %d hashes, more than a batch of %d has", len(r.BatchPath), MaxBatchSize)
	}
	path := make([][]byte, len(r.BatchPath))
	for i, h := range r.BatchPath {
		if path[i], err = hash32(fmt.Sprintf("batch_path[%d]", i), h); err != nil {
			return Checked{}, err
		}
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(r.Signature)
	if err != nil || len(sig) == 0 || base64.StdEncoding.EncodeToString(sig) != r.Signature {
		return Checked{}, errors.New("receipt: signature is not canonical standard base64")
	}
	block, rest := pem.Decode([]byte(r.Certificate))
	if block == nil || block.Type != "CERTIFICATE" || len(block.Headers) != 0 || len(rest) != 0 ||
		!bytes.Equal(pem.EncodeToMemory(block), []byte(r.Certificate)) {
		return Checked{}, errors.New("receipt: certificate is not exactly one canonical CERTIFICATE PEM block")
	}
	return Checked{
		Claim: c,
		Statement: Statement{ApplianceID: r.ApplianceID, Day: r.Day, FirstSequence: r.Sequence - r.BatchIndex,
			Size: r.BatchSize, Root: root, SignedAt: r.SignedAt},
		Path: path, SignedAt: at, Signature: sig, CertificateDER: block.Bytes,
	}, nil
}

// maxPath is the most hashes a path in a batch of MaxBatchSize has.
const maxPath = 16

// InBatch reports whether the checked claim is at its batch_index of the
// batch whose root the statement names (RFC 6962 inclusion).
func (c Checked) InBatch() error {
	index := c.Claim.Sequence - c.Statement.FirstSequence // batch_index
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, c.Statement.Size, c.Claim.Hash(), c.Path, c.Statement.Root); err != nil {
		return fmt.Errorf("receipt: the claim is not in the batch: %w", err)
	}
	return nil
}

// Verify checks a receipt on its own against the fleet CA certificate:
// every member is well formed (Check); the certificate was issued by ca to
// the receipt's appliance and valid at signed_at; the claim the members
// make is at batch_index of the batch whose root is batch_root; and the
// signature over the batch statement verifies with the certificate's key.
func Verify(r Receipt, ca *x509.Certificate) error {
	c, err := Check(r)
	if err != nil {
		return err
	}
	cert, err := x509.ParseCertificate(c.CertificateDER)
	if err != nil {
		return fmt.Errorf("receipt: certificate: %w", err)
	}
	id, err := fleet.Verify([]*x509.Certificate{cert}, ca, c.SignedAt)
	if err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if id != r.ApplianceID {
		return fmt.Errorf("receipt: certificate is for %s, receipt is from %s", id, r.ApplianceID)
	}
	if err := c.InBatch(); err != nil {
		return err
	}
	if err := fleet.CheckSignature(cert, c.Statement.Body(), c.Signature); err != nil {
		return fmt.Errorf("receipt: signature does not verify: %w", err)
	}
	return nil
}
