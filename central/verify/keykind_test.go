package verify_test

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/receipt"
	"github.com/tollgate-dev/tollgate/central/verify"
)

// signedOfKind is a head and a receipt signed by an appliance of one key
// kind, and a certificate of the same appliance id and CA but of the other
// kind.
type signedOfKind struct {
	head       head.Head
	receipt    receipt.Receipt
	otherCert  string
	foreignSig string // the other kind's signature over the same head
}

// TestKeyKinds: heads and receipts signed with an Ed25519 key and with an
// ECDSA P-256 key verify with head.Verify, receipt.Verify and this
// package; a signature under a certificate of the other kind, over a
// tampered body, or of the wrong length is a Signature failure.
func TestKeyKinds(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ca, err := fleet.NewCA("key kinds fleet CA", at.AddDate(0, -1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ca.Now = func() time.Time { return at.AddDate(0, -1, 0) }
	apps := map[fleet.KeyKind]*fleet.Appliance{}
	for _, kind := range []fleet.KeyKind{fleet.Ed25519, fleet.ECDSAP256} {
		certPEM, keyPEM, err := fleet.IssueApplianceKind(ca, "app_kinds", kind)
		if err != nil {
			t.Fatal(err)
		}
		if apps[kind], err = fleet.ParseAppliance(certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(app *fleet.Appliance) (head.Head, receipt.Receipt) {
		h, err := head.Sign(head.Head{TenantID: "acme", Day: "2026-03-01", EventCount: 3, LastSequence: 7,
			MerkleRoot: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"}, app, at)
		if err != nil {
			t.Fatal(err)
		}
		c := receipt.Claim{RequestID: "req_kinds", TenantID: "acme", ApplianceID: "app_kinds", Day: "2026-03-01",
			Sequence: 7, LeafIndex: 2, Time: "2026-03-01T11:59:59.250000Z", LeafHash: sha256.New().Sum(nil)}
		tree := receipt.NewTree([][]byte{c.Hash()})
		s, err := receipt.Sign(receipt.Statement{Day: c.Day, FirstSequence: 7, Size: 1, Root: tree.Root()}, app, at)
		if err != nil {
			t.Fatal(err)
		}
		return h, receipt.New(c, 0, tree, s)
	}
	docs := map[fleet.KeyKind]signedOfKind{}
	edHead, edReceipt := sign(apps[fleet.Ed25519])
	ecHead, ecReceipt := sign(apps[fleet.ECDSAP256])
	docs[fleet.Ed25519] = signedOfKind{edHead, edReceipt, string(apps[fleet.ECDSAP256].CertPEM), ecHead.Signature}
	docs[fleet.ECDSAP256] = signedOfKind{ecHead, ecReceipt, string(apps[fleet.Ed25519].CertPEM), edHead.Signature}
	if sig, _ := base64.StdEncoding.DecodeString(edHead.Signature); len(sig) != 64 {
		t.Fatalf("Ed25519 head signature of %d bytes", len(sig))
	}

	for kind, d := range docs {
		t.Run(string(kind), func(t *testing.T) {
			if err := head.Verify(d.head, ca.Cert); err != nil {
				t.Fatalf("head.Verify: %v", err)
			}
			if err := verify.Head(d.head, ca.Cert); err != nil {
				t.Fatalf("verify.Head: %v", err)
			}
			if err := receipt.Verify(d.receipt, ca.Cert); err != nil {
				t.Fatalf("receipt.Verify: %v", err)
			}
			if err := verify.Receipt(d.receipt, ca.Cert); err != nil {
				t.Fatalf("verify.Receipt: %v", err)
			}
			sig, _ := base64.StdEncoding.DecodeString(d.head.Signature)
			heads := []struct {
				name   string
				mutate func(*head.Head)
			}{
				{"under the other kind's certificate", func(h *head.Head) { h.Certificate = d.otherCert }},
				{"the other kind's signature", func(h *head.Head) { h.Signature = d.foreignSig }},
				{"tampered body", func(h *head.Head) { h.LastSequence++ }},
				{"truncated signature", func(h *head.Head) { h.Signature = base64.StdEncoding.EncodeToString(sig[:len(sig)-1]) }},
				{"longer signature", func(h *head.Head) { h.Signature = base64.StdEncoding.EncodeToString(append(sig, 0)) }},
			}
			for _, tt := range heads {
				t.Run("head "+tt.name, func(t *testing.T) {
					h := d.head
					tt.mutate(&h)
					if err := head.Verify(h, ca.Cert); err == nil {
						t.Fatal("head.Verify accepted it")
					}
					if err := verify.Head(h, ca.Cert); verify.KindOf(err) != verify.Signature {
						t.Fatalf("verify.Head = %v, want %v", err, verify.Signature)
					}
				})
			}
			receipts := []struct {
				name   string
				mutate func(*receipt.Receipt)
			}{
				{"under the other kind's certificate", func(r *receipt.Receipt) { r.Certificate = d.otherCert }},
				{"tampered statement", func(r *receipt.Receipt) { r.SignedAt = "2026-03-01T12:00:01Z" }},
				{"truncated signature", func(r *receipt.Receipt) {
					s, _ := base64.StdEncoding.DecodeString(r.Signature)
					r.Signature = base64.StdEncoding.EncodeToString(s[:len(s)-1])
				}},
			}
			for _, tt := range receipts {
				t.Run("receipt "+tt.name, func(t *testing.T) {
					r := d.receipt
					tt.mutate(&r)
					if err := receipt.Verify(r, ca.Cert); err == nil {
						t.Fatal("receipt.Verify accepted it")
					}
					if err := verify.Receipt(r, ca.Cert); verify.KindOf(err) != verify.Signature {
						t.Fatalf("verify.Receipt = %v, want %v", err, verify.Signature)
					}
				})
			}
		})
	}
}
