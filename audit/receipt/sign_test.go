package receipt

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// BenchmarkSign is the appliance signature a batch pays, for each kind of
// appliance key: at light load every request is its own batch.
func BenchmarkSign(b *testing.B) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ca, err := fleet.NewCA("bench fleet CA", at.AddDate(0, -1, 0))
	if err != nil {
		b.Fatal(err)
	}
	ca.Now = func() time.Time { return at.AddDate(0, -1, 0) }
	root := sha256.Sum256([]byte("root"))
	s := Statement{Day: "2026-03-01", FirstSequence: 1000, Size: 1, Root: root[:]}
	for _, kind := range []fleet.KeyKind{fleet.Ed25519, fleet.ECDSAP256} {
		certPEM, keyPEM, err := fleet.IssueApplianceKind(ca, "app_bench", kind)
		if err != nil {
			b.Fatal(err)
		}
		app, err := fleet.ParseAppliance(certPEM, keyPEM)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(kind), func(b *testing.B) {
			for b.Loop() {
				if _, err := Sign(s, app, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
