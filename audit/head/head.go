// Package head defines a signed head: the summary of one tenant's Merkle tree
// on one appliance and UTC day, signed by the appliance with its fleet
// certificate. Verification needs only the head and the fleet CA
// certificate, so it runs offline (tollgate verify, the central plane).
package head

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// OriginPrefix starts the origin line of every checkpoint body.
const OriginPrefix = "tollgate-audit/v1"

// SignedAtLayout is the format of signed_at: RFC 3339, UTC, seconds, Z.
const SignedAtLayout = "2006-01-02T15:04:05Z"

// Head is a signed head. JSON member names are those of the audit API.
type Head struct {
	TenantID    string `json:"tenant_id"`
	ApplianceID string `json:"appliance_id"`
	Day         string `json:"day"`
	// EventCount is the number of leaves in the tenant's tree.
	EventCount uint64 `json:"event_count"`
	// LastSequence is the appliance-wide sequence number of the tenant's
	// last event in the tree (0 for an empty tree).
	LastSequence uint64 `json:"last_sequence"`
	// MerkleRoot is the RFC 6962 root in lowercase hex.
	MerkleRoot string `json:"merkle_root"`
	// Signature is over Body(h) by the certificate's key (fleet.Sign):
	// Ed25519 (64 bytes) or ECDSA P-256 / SHA-256 (ASN.1 DER); standard
	// base64.
	Signature string `json:"signature"`
	SignedAt  string `json:"signed_at"`
	// Certificate is the PEM of the appliance certificate.
	Certificate string `json:"certificate"`
}

// EmptyRoot is the root of the empty tree, the SHA-256 of nothing, in hex.
func EmptyRoot() string { return hex.EncodeToString(rfc6962.DefaultHasher.EmptyRoot()) }

// FormatSignedAt formats t as a signed_at value (truncated to the second).
func FormatSignedAt(t time.Time) string { return t.UTC().Format(SignedAtLayout) }

// Origin returns the origin line of a head's checkpoint body, which binds
// the tenant, the appliance and the day.
func Origin(tenantID, applianceID, day string) string {
	return OriginPrefix + "/" + tenantID + "/" + applianceID + "/" + day
}

// Body returns the exact bytes a head's signature covers, a C2SP
// tlog-checkpoint body with one extension line per extra field:
//
//	tollgate-audit/v1/<tenant_id>/<appliance_id>/<day>
//	<event_count>
//	<standard base64 of the 32 root bytes>
//	last_sequence <last_sequence>
//	signed_at <signed_at>
//
// each line ending in "\n". It fails if a field is malformed.
func Body(h Head) ([]byte, error) {
	root, err := h.check()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(Origin(h.TenantID, h.ApplianceID, h.Day) + "\n")
	b.WriteString(strconv.FormatUint(h.EventCount, 10) + "\n")
	b.WriteString(base64.StdEncoding.EncodeToString(root) + "\n")
	b.WriteString("last_sequence " + strconv.FormatUint(h.LastSequence, 10) + "\n")
	b.WriteString("signed_at " + h.SignedAt + "\n")
	return []byte(b.String()), nil
}

// Root returns the decoded Merkle root.
func (h Head) Root() ([]byte, error) {
	root, err := hex.DecodeString(h.MerkleRoot)
	if err != nil || len(root) != 32 || hex.EncodeToString(root) != h.MerkleRoot {
		return nil, fmt.Errorf("head: merkle_root %q is not 32 bytes in lowercase hex", h.MerkleRoot)
	}
	return root, nil
}

// SignedTime parses signed_at, accepting only the SignedAtLayout form.
func (h Head) SignedTime() (time.Time, error) {
	t, err := time.Parse(SignedAtLayout, h.SignedAt)
	if err != nil || FormatSignedAt(t) != h.SignedAt {
		return time.Time{}, fmt.Errorf("head: signed_at %q is not RFC 3339 UTC seconds with Z", h.SignedAt)
	}
	return t, nil
}

// Final reports whether the head was signed after its day ended. The
// appliance never appends to a closed day, so such a head covers the whole
// day.
func (h Head) Final() bool {
	at, err1 := h.SignedTime()
	end, err2 := ids.DayEnd(h.Day)
	return err1 == nil && err2 == nil && !at.Before(end)
}

// check validates every field the body holds and returns the root bytes.
func (h Head) check() ([]byte, error) {
	if err := ids.CheckTenant(h.TenantID); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	if err := ids.CheckAppliance(h.ApplianceID); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	start, err := ids.ParseDay(h.Day)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	root, err := h.Root()
	if err != nil {
		return nil, err
	}
	at, err := h.SignedTime()
	if err != nil {
		return nil, err
	}
	if at.Before(start) {
		return nil, fmt.Errorf("head: signed_at %s is before its day %s", h.SignedAt, h.Day)
	}
	if h.EventCount > h.LastSequence {
		return nil, fmt.Errorf("head: event_count %d exceeds last_sequence %d", h.EventCount, h.LastSequence)
	}
	if h.EventCount == 0 && (h.LastSequence != 0 || h.MerkleRoot != EmptyRoot()) {
		return nil, fmt.Errorf("head: an empty tree has last_sequence 0 and the empty root")
	}
	return root, nil
}
