// Package audit is the root of Tollgate's appliance audit log: every request
// with an authenticated key becomes an event, numbered per appliance and UTC
// day, hashed into one RFC 6962 Merkle tree per tenant, appliance and day, and
// summarised by heads signed with the appliance's fleet certificate.
//
// Subpackages:
//
//   - ids: identifier formats (tenant, appliance, request, key, decision, day).
//   - leaf: an event's leaf, its RFC 8785 canonical bytes and leaf hash.
//   - fleet: the fleet CA (ECDSA P-256) and appliance certificates
//     (Ed25519 or ECDSA P-256), and the one signature choice by key.
//   - head: signed heads, their checkpoint body, offline verification.
//   - log: the durable store (bbolt), group commit, heads, proofs, pruning.
//   - service: the AuditService gRPC server over a log.
//
// The byte formats are documented in docs/audit-format.md.
package audit
