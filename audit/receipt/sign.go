package receipt

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
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
	// Signature is ASN.1 DER; Certificate the signer's PEM.
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
	digest := sha256.Sum256(s.Body())
	sig, err := app.Key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return Signed{}, fmt.Errorf("receipt: sign: %w", err)
	}
	return Signed{Statement: s, Signature: sig, Certificate: app.CertPEM}, nil
}

// New returns the receipt of claim c, the claim at index i of the batch
// whose tree is t and whose signed statement is s.
func New(c Claim, i uint64, t *Tree, s Signed) Receipt {
	path := t.Path(i)
	hexPath := make([]string, len(path))
	for j, h := range path {
		hexPath[j] = hex.EncodeToString(h)
	}
	return Receipt{
		Schema: Schema, RequestID: c.RequestID, TenantID: c.TenantID, ApplianceID: c.ApplianceID,
		Day: c.Day, Sequence: c.Sequence, LeafIndex: c.LeafIndex, Time: c.Time,
		LeafHash:   hex.EncodeToString(c.LeafHash),
		BatchIndex: i, BatchSize: t.Size(), BatchRoot: hex.EncodeToString(t.Root()), BatchPath: hexPath,
		SignedAt: s.SignedAt, Signature: base64.StdEncoding.EncodeToString(s.Signature),
		Certificate: string(s.Certificate),
	}
}

// Verify checks a receipt on its own against the fleet CA certificate:
// every member is well formed; the certificate was issued by ca to the
// receipt's appliance and valid at signed_at; the claim the members make
// is at batch_index of the batch whose root is batch_root; and the
// signature over the batch statement verifies with the certificate's key.
func Verify(r Receipt, ca *x509.Certificate) error {
	c, err := r.Claim()
	if err != nil {
		return err
	}
	at, err := ParseSignedAt(r.SignedAt)
	if err != nil {
		return err
	}
	start, _ := ids.ParseDay(r.Day) // checked by Claim
	if at.Before(start) {
		return fmt.Errorf("receipt: signed_at %s is before its day %s", r.SignedAt, r.Day)
	}
	if r.BatchSize < 1 || r.BatchSize > MaxBatchSize {
		return fmt.Errorf("receipt: batch_size %d out of range [1, %d]", r.BatchSize, MaxBatchSize)
	}
	if r.BatchIndex >= r.BatchSize {
		return fmt.Errorf("receipt: batch_index %d is not below batch_size %d", r.BatchIndex, r.BatchSize)
	}
	// The batch's claims have consecutive sequences from its first.
	if r.BatchIndex >= r.Sequence {
		return fmt.Errorf("receipt: batch_index %d is not below sequence %d", r.BatchIndex, r.Sequence)
	}
	root, err := hash32("batch_root", r.BatchRoot)
	if err != nil {
		return err
	}
	if len(r.BatchPath) > 16 {
		return fmt.Errorf("receipt: batch_path of %d hashes, more than a batch of %d has", len(r.BatchPath), MaxBatchSize)
	}
	path := make([][]byte, len(r.BatchPath))
	for i, h := range r.BatchPath {
		if path[i], err = hash32(fmt.Sprintf("batch_path[%d]", i), h); err != nil {
			return err
		}
	}
	cert, err := fleet.ParseCertificatePEM([]byte(r.Certificate))
	if err != nil {
		return fmt.Errorf("receipt: certificate: %w", err)
	}
	id, err := fleet.Verify([]*x509.Certificate{cert}, ca, at)
	if err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if id != r.ApplianceID {
		return fmt.Errorf("receipt: certificate is for %s, receipt is from %s", id, r.ApplianceID)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.BatchIndex, r.BatchSize, c.Hash(), path, root); err != nil {
		return fmt.Errorf("receipt: the claim is not in the batch: %w", err)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(r.Signature)
	if err != nil {
		return fmt.Errorf("receipt: signature is not standard base64: %w", err)
	}
	s := Statement{ApplianceID: r.ApplianceID, Day: r.Day, FirstSequence: r.Sequence - r.BatchIndex,
		Size: r.BatchSize, Root: root, SignedAt: r.SignedAt}
	if err := cert.CheckSignature(x509.ECDSAWithSHA256, s.Body(), sig); err != nil {
		return fmt.Errorf("receipt: signature does not verify: %w", err)
	}
	return nil
}
