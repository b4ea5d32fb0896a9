// Package leaf defines the leaf of an audit event: a JSON object holding the
// event's metadata (never a body), serialised as RFC 8785 (JCS) canonical
// bytes. Those bytes are what the Merkle tree commits to, through the
// RFC 6962 leaf hash SHA-256(0x00 || bytes).
package leaf

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/transparency-dev/merkle/rfc6962"
)

// Schema is the value of the schema member of every leaf of this format.
const Schema = "tollgate-audit-leaf/v1"

// Leaf is the recorded metadata of one event. Field names are the JSON
// member names; see docs/audit-format.md.
type Leaf struct {
	Schema      string `json:"schema"`
	RequestID   string `json:"request_id"`
	Sequence    uint64 `json:"sequence"`
	TenantID    string `json:"tenant_id"`
	ApplianceID string `json:"appliance_id"`
	KeyID       string `json:"key_id"`
	// Time is when the request was received, RFC 3339 UTC with microseconds
	// (see FormatTime).
	Time     string `json:"time"`
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Status is the HTTP status of the response.
	Status           int   `json:"status"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// PolicyDecisionID is omitted when no policy decision was made.
	PolicyDecisionID string `json:"policy_decision_id,omitempty"`
	// RequestSHA256 and ResponseSHA256 are lowercase hex SHA-256 digests of
	// the request body and of the response body as sent.
	RequestSHA256  string `json:"request_sha256"`
	ResponseSHA256 string `json:"response_sha256"`
	// Salt is 16 random bytes in lowercase hex, so that a leaf hash cannot be
	// confirmed by guessing the other fields.
	Salt string `json:"salt"`
}

// Canonical validates l and returns its RFC 8785 canonical bytes.
func Canonical(l Leaf) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, 640), &l), nil
}

// Parse decodes canonical leaf bytes. It refuses unknown members, an invalid
// leaf, and bytes that are not exactly the canonical form of what they hold.
func Parse(b []byte) (Leaf, error) {
	var l Leaf
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Leaf{}, fmt.Errorf("leaf: decode: %w", err)
	}
	canon, err := Canonical(l)
	if err != nil {
		return Leaf{}, err
	}
	if !bytes.Equal(canon, b) {
		return Leaf{}, fmt.Errorf("leaf: bytes are not in RFC 8785 canonical form")
	}
	return l, nil
}

// Hash returns the RFC 6962 leaf hash of canonical leaf bytes,
// SHA-256(0x00 || canonical). Written out rather than through
// rfc6962.DefaultHasher, whose hash, prefix and sum are three allocations:
// here the sum is the only one, for the hash of every event.
func Hash(canonical []byte) []byte {
	h := sha256.New()
	h.Write(leafHashPrefix[:])
	h.Write(canonical)
	return h.Sum(make([]byte, 0, sha256.Size))
}

// leafHashPrefix is RFC 6962's leaf hash prefix.
var leafHashPrefix = [1]byte{rfc6962.RFC6962LeafHashPrefix}
