package head

import (
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// VerifyConsistency checks that newer extends older: both are heads of the
// same tree (tenant, appliance, day), newer is no smaller, and the RFC 6962
// consistency proof between their sizes verifies. Signatures are not checked
// here; call Verify on each head.
func VerifyConsistency(older, newer Head, hashes [][]byte) error {
	if older.TenantID != newer.TenantID || older.ApplianceID != newer.ApplianceID || older.Day != newer.Day {
		return fmt.Errorf("head: heads of different trees: %s and %s",
			Origin(older.TenantID, older.ApplianceID, older.Day), Origin(newer.TenantID, newer.ApplianceID, newer.Day))
	}
	if older.EventCount > newer.EventCount || older.LastSequence > newer.LastSequence {
		return fmt.Errorf("head: head of size %d (last_sequence %d) does not extend size %d (last_sequence %d)",
			newer.EventCount, newer.LastSequence, older.EventCount, older.LastSequence)
	}
	r1, err := older.Root()
	if err != nil {
		return err
	}
	r2, err := newer.Root()
	if err != nil {
		return err
	}
	if older.EventCount == 0 {
		// Every tree extends the empty tree; the proof is empty.
		if len(hashes) != 0 {
			return fmt.Errorf("head: consistency proof from the empty tree must be empty")
		}
		return nil
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, older.EventCount, newer.EventCount, hashes, r1, r2); err != nil {
		return fmt.Errorf("head: consistency %d -> %d: %w", older.EventCount, newer.EventCount, err)
	}
	return nil
}

// VerifyInclusion checks that the canonical leaf bytes are the leaf at index
// in the tree h summarises: the leaf names h's tenant and appliance, its
// sequence is at most h's last_sequence, and the RFC 6962 inclusion proof
// verifies against h's root. The head's signature is not checked here.
func VerifyInclusion(h Head, leafBytes []byte, index uint64, hashes [][]byte) error {
	l, err := leaf.Parse(leafBytes)
	if err != nil {
		return fmt.Errorf("head: %w", err)
	}
	if l.TenantID != h.TenantID || l.ApplianceID != h.ApplianceID {
		return fmt.Errorf("head: leaf of %s/%s under a head of %s/%s", l.TenantID, l.ApplianceID, h.TenantID, h.ApplianceID)
	}
	if l.Sequence > h.LastSequence {
		return fmt.Errorf("head: leaf sequence %d is after the head's last_sequence %d", l.Sequence, h.LastSequence)
	}
	root, err := h.Root()
	if err != nil {
		return err
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, h.EventCount, leaf.Hash(leafBytes), hashes, root); err != nil {
		return fmt.Errorf("head: inclusion of leaf %d in tree of size %d: %w", index, h.EventCount, err)
	}
	return nil
}
