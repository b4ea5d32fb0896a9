package log

import (
	"encoding/binary"
	"fmt"
)

// Buckets of the bbolt file (see docs/audit-format.md, "Storage"). Keys
// start with the UTC day (10 bytes, YYYY-MM-DD) so that a day is a
// contiguous key range; a tenant id is followed by 0x00, which no tenant id
// contains, so that one tenant's range never holds another's.
var (
	bucketMeta     = []byte("meta")     // format, appliance_id, current_day, journal_nonce, log_id, journal_dir
	bucketSeq      = []byte("seq")      // day -> last sequence (u64) | end of its journal applied (u64)
	bucketEvents   = []byte("events")   // day|seq -> event record (see eventRecord)
	bucketRequests = []byte("requests") // request_id -> day|seq
	bucketTrees    = []byte("trees")    // day|tenant -> tree state
	bucketNodes    = []byte("nodes")    // day|tenant|0|level(u8)|index(u64) -> hash
	bucketLeaves   = []byte("leaves")   // day|tenant|0|index(u64) -> sequence (u64) | request id
	bucketHeads    = []byte("heads")    // day|tenant|0|n(u64) -> head JSON
	bucketFinal    = []byte("final")    // day -> signed_at of its final heads
	bucketPruned   = []byte("pruned")   // day -> when its journal (bodies) was pruned

	allBuckets = [][]byte{bucketMeta, bucketSeq, bucketEvents, bucketRequests,
		bucketTrees, bucketNodes, bucketLeaves, bucketHeads, bucketFinal, bucketPruned,
		bucketBatches, bucketCerts}
)

// Meta keys.
var (
	metaFormat     = []byte("format")
	metaAppliance  = []byte("appliance_id")
	metaCurrentDay = []byte("current_day")
	// metaJournalNonce is the nonce every journal frame carries (frameMark).
	metaJournalNonce = []byte("journal_nonce")
	// metaLogID is the log's random id, also in its journal directory's
	// JournalIDFile; metaJournalDir is the journal directory the log was
	// last opened with, stored once that file is durable (journaldir.go).
	metaLogID      = []byte("log_id")
	metaJournalDir = []byte("journal_dir")
)

// formatVersion is the layout version in meta/format.
// v2: audit.db is derived from the journal (journal.go); v1 logs, whose
// bodies files hold no events, are refused.
// v3: event records say how their bodies are stored (codec and stored
// length: record.go), and journal frames of version 3 may hold them
// compressed. A v2 log is read as it is and marked v3 at open, so that
// versions that cannot read compressed bodies refuse it rather than fail
// on its new events.
const (
	formatVersion   = "tollgate-audit-bbolt/v3"
	formatVersionV2 = "tollgate-audit-bbolt/v2"
)

const dayLen = len("2006-01-02")

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// Keys are built in one allocation of their final size: the log makes
// several for every event it applies.

// eventKey is day|seq.
func eventKey(day string, seq uint64) []byte {
	k := append(make([]byte, 0, len(day)+8), day...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// splitEventKey returns the day and sequence of an event key.
func splitEventKey(k []byte) (string, uint64, error) {
	if len(k) != dayLen+8 {
		return "", 0, fmt.Errorf("audit log: malformed event key %x", k)
	}
	return string(k[:dayLen]), binary.BigEndian.Uint64(k[dayLen:]), nil
}

// treeKey is day|tenant.
func treeKey(day, tenant string) []byte { return []byte(day + tenant) }

// tenantPrefix is day|tenant|0, the prefix of a tree's nodes and heads.
func tenantPrefix(day, tenant string) []byte { return tenantKey(day, tenant, 0) }

// tenantKey is day|tenant|0 with room for more bytes after it.
func tenantKey(day, tenant string, room int) []byte {
	k := make([]byte, 0, len(day)+len(tenant)+1+room)
	k = append(k, day...)
	k = append(k, tenant...)
	return append(k, 0)
}

// nodeKey is day|tenant|0|level|index.
func nodeKey(day, tenant string, level uint, index uint64) []byte {
	k := append(tenantKey(day, tenant, 1+8), byte(level))
	return binary.BigEndian.AppendUint64(k, index)
}

// leafKey is day|tenant|0|index.
func leafKey(day, tenant string, index uint64) []byte {
	return binary.BigEndian.AppendUint64(tenantKey(day, tenant, 8), index)
}

// leafValue is a leaf's value: sequence (u64) | request id.
func leafValue(seq uint64, requestID []byte) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(requestID)), seq)
	return append(v, requestID...)
}

// headKey is day|tenant|0|n.
func headKey(day, tenant string, n uint64) []byte {
	return binary.BigEndian.AppendUint64(tenantKey(day, tenant, 8), n)
}

// getU64 decodes a stored u64; a missing value is 0.
func getU64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
