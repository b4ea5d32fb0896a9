package head

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

type pki struct {
	ca  *fleet.CA
	app *fleet.Appliance
}

var keyKinds = []fleet.KeyKind{fleet.Ed25519, fleet.ECDSAP256}

func newPKI(t *testing.T, id string) pki {
	t.Helper()
	return newPKIKind(t, id, fleet.DefaultKeyKind)
}

func newPKIKind(t *testing.T, id string, kind fleet.KeyKind) pki {
	t.Helper()
	ca, err := fleet.NewCA("test CA", day0)
	if err != nil {
		t.Fatal(err)
	}
	ca.Now = func() time.Time { return day0 }
	return pki{ca: ca, app: issueKind(t, ca, id, kind)}
}

func issueKind(t *testing.T, ca *fleet.CA, id string, kind fleet.KeyKind) *fleet.Appliance {
	t.Helper()
	c, k, err := fleet.IssueApplianceKind(ca, id, kind)
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func unsigned() Head {
	return Head{TenantID: "acme", Day: "2026-03-01", EventCount: 3, LastSequence: 7,
		MerkleRoot: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"}
}

func mustSign(t *testing.T, h Head, app *fleet.Appliance, at time.Time) Head {
	t.Helper()
	s, err := Sign(h, app, at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignVerify(t *testing.T) {
	for _, kind := range keyKinds {
		t.Run(string(kind), func(t *testing.T) { testSignVerify(t, kind) })
	}
}

func testSignVerify(t *testing.T, kind fleet.KeyKind) {
	p := newPKIKind(t, "app_one", kind)
	h := mustSign(t, unsigned(), p.app, day0.Add(90*time.Minute+500*time.Millisecond))
	if h.SignedAt != "2026-03-01T01:30:00Z" || h.ApplianceID != "app_one" {
		t.Fatalf("signed head %+v", h)
	}
	if err := Verify(h, p.ca.Cert); err != nil {
		t.Fatal(err)
	}
	empty := Head{TenantID: "acme", Day: "2026-03-01", MerkleRoot: EmptyRoot()}
	if err := Verify(mustSign(t, empty, p.app, day0), p.ca.Cert); err != nil {
		t.Fatalf("empty head: %v", err)
	}
	if EmptyRoot() != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("EmptyRoot = %s", EmptyRoot())
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	for _, kind := range keyKinds {
		t.Run(string(kind), func(t *testing.T) { testVerifyRefusesTampering(t, kind) })
	}
}

func testVerifyRefusesTampering(t *testing.T, kind fleet.KeyKind) {
	p := newPKIKind(t, "app_one", kind)
	other := issueKind(t, p.ca, "app_two", kind)
	foreign := newPKIKind(t, "app_one", kind)
	otherKind := fleet.ECDSAP256
	if kind == fleet.ECDSAP256 {
		otherKind = fleet.Ed25519
	}
	sameIDOtherKind := issueKind(t, p.ca, "app_one", otherKind)
	good := mustSign(t, unsigned(), p.app, day0.Add(time.Hour))
	tests := []struct {
		name   string
		mutate func(*Head)
	}{
		{"tenant", func(h *Head) { h.TenantID = "globex" }},
		{"appliance", func(h *Head) { h.ApplianceID = "app_two" }},
		{"day", func(h *Head) { h.Day = "2026-02-28" }},
		{"event count", func(h *Head) { h.EventCount = 2 }},
		{"last sequence", func(h *Head) { h.LastSequence = 8 }},
		{"root", func(h *Head) { h.MerkleRoot = strings.Repeat("0", 64) }},
		{"root uppercase", func(h *Head) { h.MerkleRoot = strings.ToUpper(h.MerkleRoot) }},
		{"signed at", func(h *Head) { h.SignedAt = "2026-03-01T01:00:01Z" }},
		{"signed at format", func(h *Head) { h.SignedAt = "2026-03-01T01:00:00+00:00" }},
		{"signature", func(h *Head) { h.Signature = good.Signature[:len(good.Signature)-4] + "AAA=" }},
		{"signature encoding", func(h *Head) { h.Signature = strings.ReplaceAll(h.Signature, "+", "-") + "!" }},
		{"certificate of another appliance", func(h *Head) { h.Certificate = string(other.CertPEM) }},
		{"certificate of another fleet", func(h *Head) { h.Certificate = string(foreign.app.CertPEM) }},
		{"certificate of a key of the other kind", func(h *Head) { h.Certificate = string(sameIDOtherKind.CertPEM) }},
		{"no certificate", func(h *Head) { h.Certificate = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good
			tt.mutate(&h)
			if err := Verify(h, p.ca.Cert); err == nil {
				t.Fatal("Verify accepted a tampered head")
			}
		})
	}
	if err := Verify(good, foreign.ca.Cert); err == nil {
		t.Fatal("Verify accepted a head under another fleet CA")
	}
}

func TestVerifyUsesSignedAt(t *testing.T) {
	p := newPKI(t, "app_one")
	late := p.app.Cert.NotAfter.Add(time.Hour)
	if _, err := Sign(unsigned(), p.app, late); err == nil {
		t.Fatal("Sign accepted an instant after the certificate expired")
	}
	// Forge signed_at past expiry by signing with a copy whose validity
	// is stretched: Verify must still refuse it.
	stretched := *p.app
	cert := *p.app.Cert
	cert.NotAfter = late.Add(time.Hour)
	stretched.Cert = &cert
	h := mustSign(t, unsigned(), &stretched, late)
	if err := Verify(h, p.ca.Cert); err == nil {
		t.Fatal("Verify accepted a head signed after its certificate expired")
	}
	// A head signed while the certificate was valid stays valid forever.
	if err := Verify(mustSign(t, unsigned(), p.app, day0.Add(time.Hour)), p.ca.Cert); err != nil {
		t.Fatal(err)
	}
}

func TestBodyRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Head)
	}{
		{"count above last sequence", func(h *Head) { h.EventCount = 8 }},
		{"empty tree with a root", func(h *Head) { h.EventCount, h.LastSequence = 0, 0 }},
		{"empty tree with a sequence", func(h *Head) { h.EventCount, h.MerkleRoot = 0, EmptyRoot() }},
		{"signed before its day", func(h *Head) { h.SignedAt = "2026-02-28T23:59:59Z" }},
		{"tenant with slash", func(h *Head) { h.TenantID = "a/b" }},
		{"day format", func(h *Head) { h.Day = "2026-3-1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := unsigned()
			h.ApplianceID, h.SignedAt = "app_one", "2026-03-01T01:00:00Z"
			tt.mutate(&h)
			if b, err := Body(h); err == nil {
				t.Fatalf("Body accepted:\n%s", b)
			}
		})
	}
}

func TestFinal(t *testing.T) {
	h := unsigned()
	for at, want := range map[string]bool{
		"2026-03-01T23:59:59Z": false,
		"2026-03-02T00:00:00Z": true,
		"2026-03-05T10:00:00Z": true,
	} {
		h.SignedAt = at
		if h.Final() != want {
			t.Errorf("Final at %s = %v", at, !want)
		}
	}
}
