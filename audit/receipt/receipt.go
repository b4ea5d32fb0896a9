// Package receipt defines an audit receipt: the appliance's signed promise,
// given with the reply, that a request's leaf is in its log. The log signs
// one statement per group commit over the RFC 6962 root of the batch's
// receipt claims; each receipt carries its claim's members, its path in the
// batch and the signed statement, so it verifies on its own against the
// fleet CA certificate, as a head does (docs/audit-format.md, "Receipts").
package receipt

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Schema names the receipt document and its claims.
const Schema = "tollgate-audit-receipt/v1"

// OriginPrefix starts the first line of a batch statement.
const OriginPrefix = "tollgate-audit-receipts/v1"

// MaxBatchSize bounds the claims one statement covers, and so a path's
// length (16 hashes).
const MaxBatchSize = 1 << 16

// maxJSONInt is the largest integer an I-JSON number holds exactly.
const maxJSONInt = 1<<53 - 1

// Receipt is a receipt document. JSON member names are the document's.
type Receipt struct {
	Schema      string `json:"schema"`
	RequestID   string `json:"request_id"`
	TenantID    string `json:"tenant_id"`
	ApplianceID string `json:"appliance_id"`
	Day         string `json:"day"`
	// Sequence is the event's appliance-wide sequence within Day.
	Sequence uint64 `json:"sequence"`
	// LeafIndex is the event's index in its tenant's tree of Day.
	LeafIndex uint64 `json:"leaf_index"`
	// Time is the leaf's time: when the request was received.
	Time string `json:"time"`
	// LeafHash is the RFC 6962 leaf hash of the event's leaf, lowercase hex.
	LeafHash string `json:"leaf_hash"`
	// BatchIndex is the claim's index in its batch, BatchSize the
	// batch's claims, BatchRoot their RFC 6962 root, and BatchPath the
	// inclusion proof of the claim in it, from the claim up.
	BatchIndex uint64   `json:"batch_index"`
	BatchSize  uint64   `json:"batch_size"`
	BatchRoot  string   `json:"batch_root"`
	BatchPath  []string `json:"batch_path"`
	// SignedAt, Signature and Certificate are the batch statement's, as
	// a head's: RFC 3339 UTC seconds; by the certificate's key over
	// Statement (fleet.Sign: Ed25519, or ECDSA P-256 with SHA-256, ASN.1
	// DER), standard base64; the appliance certificate's PEM.
	SignedAt    string `json:"signed_at"`
	Signature   string `json:"signature"`
	Certificate string `json:"certificate"`
}

// Claim is what one receipt promises, the leaf of its batch's tree.
type Claim struct {
	RequestID, TenantID, ApplianceID, Day string
	Sequence, LeafIndex                   uint64
	Time                                  string
	LeafHash                              []byte
}

// Claim returns the receipt's claim, checking every member's form.
func (r Receipt) Claim() (Claim, error) {
	if r.Schema != Schema {
		return Claim{}, fmt.Errorf("receipt: schema %q, want %q", r.Schema, Schema)
	}
	c := Claim{RequestID: r.RequestID, TenantID: r.TenantID, ApplianceID: r.ApplianceID, Day: r.Day,
		Sequence: r.Sequence, LeafIndex: r.LeafIndex, Time: r.Time}
	var err error
	if c.LeafHash, err = hash32("leaf_hash", r.LeafHash); err != nil {
		return Claim{}, err
	}
	return c, c.check()
}

func (c Claim) check() error {
	if err := ids.CheckRequest(c.RequestID); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if err := ids.CheckTenant(c.TenantID); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if err := ids.CheckAppliance(c.ApplianceID); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if _, err := ids.ParseDay(c.Day); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if c.Sequence < 1 || c.Sequence > maxJSONInt {
		return fmt.Errorf("receipt: sequence %d out of range [1, 2^53-1]", c.Sequence)
	}
	// A tenant's leaf i has an appliance-wide sequence of at least i+1.
	if c.LeafIndex >= c.Sequence {
		return fmt.Errorf("receipt: leaf_index %d is not below sequence %d", c.LeafIndex, c.Sequence)
	}
	if _, err := leaf.ParseTime(c.Time); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	if len(c.LeafHash) != 32 {
		return fmt.Errorf("receipt: leaf_hash of %d bytes", len(c.LeafHash))
	}
	return nil
}

// Bytes returns the claim's RFC 8785 canonical bytes: a JSON object of
// appliance_id, day, leaf_hash (lowercase hex), leaf_index, request_id,
// schema, sequence, tenant_id and time, in that (name) order. Every member
// is an integer or a string of characters that need no escape (checked by
// Claim), so the canonical form is written directly.
func (c Claim) Bytes() []byte { return c.appendBytes(make([]byte, 0, 320)) }

func (c Claim) appendBytes(b []byte) []byte {
	b = append(b, `{"appliance_id":"`...)
	b = append(b, c.ApplianceID...)
	b = append(b, `","day":"`...)
	b = append(b, c.Day...)
	b = append(b, `","leaf_hash":"`...)
	b = hex.AppendEncode(b, c.LeafHash)
	b = append(b, `","leaf_index":`...)
	b = strconv.AppendUint(b, c.LeafIndex, 10)
	b = append(b, `,"request_id":"`...)
	b = append(b, c.RequestID...)
	b = append(b, `","schema":"`+Schema+`","sequence":`...)
	b = strconv.AppendUint(b, c.Sequence, 10)
	b = append(b, `,"tenant_id":"`...)
	b = append(b, c.TenantID...)
	b = append(b, `","time":"`...)
	b = append(b, c.Time...)
	return append(b, `"}`...)
}

// Hash is the claim's RFC 6962 leaf hash, SHA-256(0x00 || Bytes()): the
// leaf of its batch's tree.
func (c Claim) Hash() []byte { return c.AppendHash(make([]byte, 0, sha256.Size)) }

// AppendHash appends the claim's hash (Hash) to dst, hashing its bytes
// from a buffer on the stack.
func (c Claim) AppendHash(dst []byte) []byte {
	var buf [512]byte
	b := append(buf[:0], 0) // RFC 6962's leaf prefix
	h := sha256.Sum256(c.appendBytes(b))
	return append(dst, h[:]...)
}

// Statement is what one signature covers: a batch of claims.
type Statement struct {
	ApplianceID, Day string
	// FirstSequence is the sequence of the batch's first claim; the
	// claims have consecutive sequences.
	FirstSequence uint64
	Size          uint64
	Root          []byte
	SignedAt      string
}

// Body returns the bytes a statement's signature covers, in the form of a
// head's checkpoint body:
//
//	tollgate-audit-receipts/v1/<appliance_id>/<day>
//	<batch size>
//	<standard base64 of the 32 root bytes>
//	first_sequence <sequence of the batch's first claim>
//	signed_at <signed_at>
//
// each line ending in "\n".
func (s Statement) Body() []byte {
	// One allocation: room for the strings, the root's base64 and two
	// numbers of at most 20 digits.
	b := make([]byte, 0, len(OriginPrefix)+len(s.ApplianceID)+len(s.Day)+len(s.SignedAt)+
		base64.StdEncoding.EncodedLen(len(s.Root))+2*20+len("//\n\n\nfirst_sequence \nsigned_at \n"))
	b = append(b, OriginPrefix+"/"...)
	b = append(b, s.ApplianceID...)
	b = append(b, '/')
	b = append(b, s.Day...)
	b = append(b, '\n')
	b = strconv.AppendUint(b, s.Size, 10)
	b = append(b, '\n')
	b = base64.StdEncoding.AppendEncode(b, s.Root)
	b = append(b, "\nfirst_sequence "...)
	b = strconv.AppendUint(b, s.FirstSequence, 10)
	b = append(b, "\nsigned_at "...)
	b = append(b, s.SignedAt...)
	return append(b, '\n')
}

// ParseSignedAt parses signed_at, accepting only head.SignedAtLayout.
func ParseSignedAt(s string) (time.Time, error) {
	t, err := time.Parse(head.SignedAtLayout, s)
	var buf [len(head.SignedAtLayout) + 8]byte // the round trip on the stack
	if err != nil || string(t.UTC().AppendFormat(buf[:0], head.SignedAtLayout)) != s {
		return time.Time{}, fmt.Errorf("receipt: signed_at %q is not RFC 3339 UTC seconds with Z", s)
	}
	return t, nil
}

func hash32(name, s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return nil, fmt.Errorf("receipt: %s %q is not 32 bytes in lowercase hex", name, s)
	}
	return b, nil
}
