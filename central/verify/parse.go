package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// ProofDoc is an inclusion proof as the central plane serves it
// (GET /v1/tenants/{tenant_id}/audit/proof).
type ProofDoc struct {
	ApplianceID string
	Day         string
	RequestID   string
	Sequence    uint64
	LeafIndex   uint64
	TreeSize    uint64
	LeafHash    []byte
	AuditPath   [][]byte
	Head        head.Head
	// Leaf is the canonical leaf the document carries (the bytes of its
	// leaf member's string), nil when it carries none ("").
	Leaf []byte
}

// ForkDoc is one fork of a forks document (GET
// /v1/tenants/{tenant_id}/audit/forks): the refused head, the stored head
// it contradicts, the stored root at the refused head's size and, when that
// root was rebuilt from the stored nodes, the consistency proof from it to
// the stored head.
type ForkDoc struct {
	Number      uint64
	TenantID    string
	ApplianceID string
	Day         string
	ReceivedAt  string
	SignedHead  head.Head
	StoredHead  head.Head
	StoredRoot  []byte
	FromNodes   bool
	// ConsistencyProof is empty unless FromNodes.
	ConsistencyProof [][]byte
}

// maxForks is the most forks a forks document holds: a page of the forks
// list (the central plane's page size, service.MaxForksPageSize).
const maxForks = 1000

// maxConsistencyHashes bounds a fork's consistency_proof: a proof between
// trees of at most 2^32 leaves has fewer hashes.
const maxConsistencyHashes = 64

// ParseHeads parses a heads document: the REST list {"data":[head, ...]}
// or a page of it (with a next_page_token, a non-empty string), a page of
// a tree's history (GET .../audit/history, with a next_from, an integer),
// or one head object. No signature covers next_page_token or next_from;
// they are otherwise ignored.
func ParseHeads(data []byte) ([]head.Head, error) {
	r, err := newReader(data)
	if err != nil {
		return nil, err
	}
	heads := []head.Head{}
	next := false // a next_page_token or next_from was read
	if firstMember(data) == "data" {
		err = r.object("heads", map[string]func(*reader) error{"data": func(r *reader) error {
			if err := r.delim('['); err != nil {
				return err
			}
			for i := 0; r.dec.More(); i++ {
				h, err := readHead(r, fmt.Sprintf("data[%d]", i))
				if err != nil {
					return err
				}
				heads = append(heads, h)
			}
			return r.delim(']')
		}, "next_page_token": func(r *reader) error {
			var tok string
			if err := r.str(&tok); err != nil {
				return err
			}
			if tok == "" {
				return fail(Malformed, "empty")
			}
			if next {
				return fail(Malformed, "a page has next_page_token (the heads list) or next_from (a tree's history), not both")
			}
			next = true
			return nil
		}, "next_from": func(r *reader) error {
			var n uint64
			if err := r.uint(&n); err != nil {
				return err
			}
			if n > math.MaxUint32 {
				return fail(Malformed, "%d beyond 32 bits", n)
			}
			if next {
				return fail(Malformed, "a page has next_page_token (the heads list) or next_from (a tree's history), not both")
			}
			next = true
			return nil
		}}, "next_page_token", "next_from")
	} else {
		var h head.Head
		if h, err = readHead(r, "head"); err == nil {
			heads = append(heads, h)
		}
	}
	if err != nil {
		return nil, err
	}
	return heads, r.end()
}

// ParseProof parses a proof document.
func ParseProof(data []byte) (ProofDoc, error) {
	r, err := newReader(data)
	if err != nil {
		return ProofDoc{}, err
	}
	var p ProofDoc
	var leafHash string
	var path []string
	err = r.object("proof", map[string]func(*reader) error{
		"appliance_id": func(r *reader) error { return r.str(&p.ApplianceID) },
		"day":          func(r *reader) error { return r.str(&p.Day) },
		"request_id":   func(r *reader) error { return r.str(&p.RequestID) },
		"sequence":     func(r *reader) error { return r.uint(&p.Sequence) },
		"leaf_index":   func(r *reader) error { return r.uint(&p.LeafIndex) },
		"tree_size":    func(r *reader) error { return r.uint(&p.TreeSize) },
		"leaf_hash":    func(r *reader) error { return r.str(&leafHash) },
		"audit_path":   func(r *reader) error { return r.strs(&path) },
		"head": func(r *reader) error {
			var err error
			p.Head, err = readHead(r, "head")
			return err
		},
		"leaf": func(r *reader) error { return readLeaf(r, &p.Leaf) },
	})
	if err != nil {
		return ProofDoc{}, err
	}
	if err := r.end(); err != nil {
		return ProofDoc{}, err
	}
	if p.LeafHash, err = decodeHash(leafHash); err != nil {
		return ProofDoc{}, wrap(Malformed, fmt.Errorf("proof.leaf_hash: %w", err))
	}
	p.AuditPath = make([][]byte, len(path))
	for i, s := range path {
		if p.AuditPath[i], err = decodeHash(s); err != nil {
			return ProofDoc{}, wrap(Malformed, fmt.Errorf("proof.audit_path[%d]: %w", i, err))
		}
	}
	return p, nil
}

// ParseForks parses a forks document: {"data":[fork, ...]} with, on a page
// that more forks may follow, next_from (which no signature covers, and
// which is otherwise ignored).
func ParseForks(data []byte) ([]ForkDoc, error) {
	r, err := newReader(data)
	if err != nil {
		return nil, err
	}
	forks := []ForkDoc{}
	err = r.object("forks", map[string]func(*reader) error{"data": func(r *reader) error {
		if err := r.delim('['); err != nil {
			return err
		}
		for i := 0; r.dec.More(); i++ {
			if i == maxForks {
				return fail(Malformed, "more than %d forks", maxForks)
			}
			f, err := readFork(r, fmt.Sprintf("data[%d]", i))
			if err != nil {
				return err
			}
			forks = append(forks, f)
		}
		return r.delim(']')
	}, "next_from": func(r *reader) error {
		var n uint64
		return r.uint(&n)
	}}, "next_from")
	if err != nil {
		return nil, err
	}
	return forks, r.end()
}

// readFork reads a fork object; what names it in errors.
func readFork(r *reader, what string) (ForkDoc, error) {
	var f ForkDoc
	var storedRoot string
	var hashes []string
	err := r.object(what, map[string]func(*reader) error{
		"number":       func(r *reader) error { return r.uint(&f.Number) },
		"tenant_id":    func(r *reader) error { return r.str(&f.TenantID) },
		"appliance_id": func(r *reader) error { return r.str(&f.ApplianceID) },
		"day":          func(r *reader) error { return r.str(&f.Day) },
		"received_at":  func(r *reader) error { return r.str(&f.ReceivedAt) },
		"signed_head": func(r *reader) error {
			var err error
			f.SignedHead, err = readHead(r, "signed_head")
			return err
		},
		"stored_head": func(r *reader) error {
			var err error
			f.StoredHead, err = readHead(r, "stored_head")
			return err
		},
		"stored_root":            func(r *reader) error { return r.str(&storedRoot) },
		"stored_root_from_nodes": func(r *reader) error { return r.boolean(&f.FromNodes) },
		"consistency_proof":      func(r *reader) error { return r.strs(&hashes) },
	})
	if err != nil {
		return ForkDoc{}, err
	}
	if f.Number > math.MaxUint32 {
		return ForkDoc{}, fail(Malformed, "%s.number: %d beyond 32 bits", what, f.Number)
	}
	if _, err := (head.Head{SignedAt: f.ReceivedAt}).SignedTime(); err != nil {
		return ForkDoc{}, fail(Malformed, "%s.received_at: %q is not RFC 3339 UTC seconds with Z", what, f.ReceivedAt)
	}
	if f.StoredRoot, err = decodeHash(storedRoot); err != nil {
		return ForkDoc{}, wrap(Malformed, fmt.Errorf("%s.stored_root: %w", what, err))
	}
	if len(hashes) > maxConsistencyHashes {
		return ForkDoc{}, fail(Malformed, "%s.consistency_proof: %d hashes, at most %d", what, len(hashes), maxConsistencyHashes)
	}
	f.ConsistencyProof = make([][]byte, len(hashes))
	for i, s := range hashes {
		if f.ConsistencyProof[i], err = decodeHash(s); err != nil {
			return ForkDoc{}, wrap(Malformed, fmt.Errorf("%s.consistency_proof[%d]: %w", what, i, err))
		}
	}
	return f, nil
}

// readHead reads a head object; what names it in errors.
func readHead(r *reader, what string) (head.Head, error) {
	var h head.Head
	err := r.object(what, map[string]func(*reader) error{
		"tenant_id":     func(r *reader) error { return r.str(&h.TenantID) },
		"appliance_id":  func(r *reader) error { return r.str(&h.ApplianceID) },
		"day":           func(r *reader) error { return r.str(&h.Day) },
		"event_count":   func(r *reader) error { return r.uint(&h.EventCount) },
		"last_sequence": func(r *reader) error { return r.uint(&h.LastSequence) },
		"merkle_root":   func(r *reader) error { return r.str(&h.MerkleRoot) },
		"signature":     func(r *reader) error { return r.str(&h.Signature) },
		"signed_at":     func(r *reader) error { return r.str(&h.SignedAt) },
		"certificate":   func(r *reader) error { return r.str(&h.Certificate) },
	})
	if err != nil {
		return head.Head{}, err
	}
	if err := checkEncodings(h); err != nil {
		return head.Head{}, wrap(Malformed, fmt.Errorf("%s: %w", what, err))
	}
	return h, nil
}

// checkEncodings refuses a head whose root, signature or certificate is
// not in its one canonical encoding, so that no byte of a document can
// change without the verification failing.
func checkEncodings(h head.Head) error {
	if _, err := decodeHash(h.MerkleRoot); err != nil {
		return fmt.Errorf("merkle_root: %w", err)
	}
	if _, err := decodeSignature(h.Signature); err != nil {
		return err
	}
	if _, err := certificateDER(h.Certificate); err != nil {
		return err
	}
	return nil
}

// decodeHash decodes 32 bytes of lowercase hex.
func decodeHash(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return nil, fmt.Errorf("%q is not 32 bytes of lowercase hex", s)
	}
	return b, nil
}

// decodeSignature decodes canonical standard base64.
func decodeSignature(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 || base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("signature is not canonical standard base64")
	}
	return b, nil
}

// certificateDER returns the DER of a certificate PEM that is exactly one
// CERTIFICATE block, without headers, as encoding/pem writes it.
func certificateDER(s string) ([]byte, error) {
	block, rest := pem.Decode([]byte(s))
	if block == nil || block.Type != "CERTIFICATE" || len(block.Headers) != 0 || len(rest) != 0 ||
		!bytes.Equal(pem.EncodeToMemory(block), []byte(s)) {
		return nil, fmt.Errorf("certificate is not exactly one canonical CERTIFICATE PEM block")
	}
	return block.Bytes, nil
}
