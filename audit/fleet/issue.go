package fleet

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// ApplianceURI returns the URI SAN of an appliance certificate,
// urn:tollgate:appliance:<appliance_id>.
func ApplianceURI(applianceID string) *url.URL {
	return &url.URL{Scheme: "urn", Opaque: "tollgate:appliance:" + applianceID}
}

// IssueAppliance issues an appliance certificate for applianceID (app_<id>)
// with a fresh key of DefaultKeyKind (IssueApplianceKind).
func IssueAppliance(ca *CA, applianceID string) (certPEM, keyPEM []byte, err error) {
	return IssueApplianceKind(ca, applianceID, DefaultKeyKind)
}

// IssueApplianceKind issues an appliance certificate for applianceID
// (app_<id>) with a fresh key of kind, valid for ApplianceValidity. The
// appliance id is the subject common name and a URI SAN (ApplianceURI).
func IssueApplianceKind(ca *CA, applianceID string, kind KeyKind) (certPEM, keyPEM []byte, err error) {
	if err := ids.CheckAppliance(applianceID); err != nil {
		return nil, nil, fmt.Errorf("fleet: %w", err)
	}
	key, err := newKey(kind)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: appliance key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := ca.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: applianceID, Organization: []string{"Tollgate"}},
		URIs:                  []*url.URL{ApplianceURI(applianceID)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(ApplianceValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: appliance certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("fleet: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
