package head

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// Sign returns h signed by app at the instant at: it sets appliance_id,
// signed_at (at, truncated to the second), certificate and signature. It
// refuses an instant outside the certificate's validity, when the head
// would not verify.
func Sign(h Head, app *fleet.Appliance, at time.Time) (Head, error) {
	if app == nil || app.Key == nil || app.Cert == nil {
		return Head{}, errors.New("head: no appliance certificate and key to sign with")
	}
	h.ApplianceID = app.ID
	h.SignedAt = FormatSignedAt(at)
	if t, _ := h.SignedTime(); t.Before(app.Cert.NotBefore) || t.After(app.Cert.NotAfter) {
		return Head{}, fmt.Errorf("head: signed_at %s outside the validity of the certificate of %s (%s to %s)",
			h.SignedAt, app.ID, app.Cert.NotBefore.UTC().Format(time.RFC3339), app.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	h.Certificate = string(app.CertPEM)
	body, err := Body(h)
	if err != nil {
		return Head{}, err
	}
	sig, err := app.Sign(body)
	if err != nil {
		return Head{}, fmt.Errorf("head: sign: %w", err)
	}
	h.Signature = base64.StdEncoding.EncodeToString(sig)
	return h, nil
}

// Verify checks a head on its own against the fleet CA certificate: every
// field is well formed, the embedded certificate was issued by ca to the
// head's appliance and was valid at signed_at, and the signature over
// Body(h) verifies with its key.
func Verify(h Head, ca *x509.Certificate) error {
	body, err := Body(h)
	if err != nil {
		return err
	}
	at, err := h.SignedTime()
	if err != nil {
		return err
	}
	cert, err := fleet.ParseCertificatePEM([]byte(h.Certificate))
	if err != nil {
		return fmt.Errorf("head: certificate: %w", err)
	}
	id, err := fleet.Verify([]*x509.Certificate{cert}, ca, at)
	if err != nil {
		return fmt.Errorf("head: %w", err)
	}
	if id != h.ApplianceID {
		return fmt.Errorf("head: certificate is for %s, head is from %s", id, h.ApplianceID)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(h.Signature)
	if err != nil {
		return fmt.Errorf("head: signature is not standard base64: %w", err)
	}
	if err := fleet.CheckSignature(cert, body, sig); err != nil {
		return fmt.Errorf("head: signature does not verify: %w", err)
	}
	return nil
}
