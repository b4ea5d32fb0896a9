package fleet

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// EnsureDev gives a development appliance its PKI in dir: on first use it
// makes a fleet CA (CACertFile, CAKeyFile) and issues an appliance
// certificate for applianceID (ApplianceCertFile, ApplianceKeyFile); later it
// loads them. It returns the appliance and the fleet CA certificate, and
// fails if the existing certificate names another appliance or does not
// verify under the CA now.
func EnsureDev(dir, applianceID string) (*Appliance, *x509.Certificate, error) {
	ca, err := loadOrInitCA(dir)
	if err != nil {
		return nil, nil, err
	}
	certFile, keyFile := filepath.Join(dir, ApplianceCertFile), filepath.Join(dir, ApplianceKeyFile)
	if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
		certPEM, keyPEM, err := IssueAppliance(ca, applianceID)
		if err != nil {
			return nil, nil, err
		}
		if err := SaveAppliance(dir, certPEM, keyPEM); err != nil {
			return nil, nil, err
		}
	}
	app, err := LoadAppliance(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	if app.ID != applianceID {
		return nil, nil, fmt.Errorf("fleet: %s is for %s, not %s", certFile, app.ID, applianceID)
	}
	if _, err := Verify([]*x509.Certificate{app.Cert}, ca.Cert, time.Now()); err != nil {
		return nil, nil, err
	}
	return app, ca.Cert, nil
}

func loadOrInitCA(dir string) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
		return InitCA(dir)
	}
	return LoadCA(certFile, keyFile)
}
