package centralclient

import (
	"strconv"

	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/apierr"
)

// Reasons of a PublishHead refusal, the ErrorInfo reason of its status.
// The central plane refuses with these (its ingest package names them) and
// an appliance decides on them whether to resend, wait or give up.
const (
	ReasonInvalidHead        = "invalid_head"
	ReasonCertificate        = "certificate_invalid"
	ReasonSignature          = "signature_invalid"
	ReasonApplianceMismatch  = "appliance_mismatch"
	ReasonFromFuture         = "signed_in_future"
	ReasonInvalidLeaves      = "invalid_leaves"
	ReasonLeafMismatch       = "leaf_mismatch"
	ReasonRootMismatch       = "root_mismatch"
	ReasonInconsistent       = "inconsistent"
	ReasonDuplicateRequestID = "duplicate_request_id"
	ReasonLeafGap            = "leaf_gap"
	ReasonStaleHead          = "stale_head"
	ReasonTreeFinal          = "tree_final"
	ReasonLeavesPruned       = "leaves_pruned"
	ReasonConflict           = "conflict"
)

// MetaStoredEventCount is the ErrorInfo metadata key of a refusal that
// holds the event_count central stores for the tree.
const MetaStoredEventCount = "stored_event_count"

// RefusalOf reads a PublishHead error: the refusal's reason and the stored
// event_count, if the error is a refusal.
func RefusalOf(err error) (reason string, stored uint64, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return "", 0, false
	}
	info := apierr.Info(st)
	if info == nil {
		return "", 0, false
	}
	n, _ := strconv.ParseUint(info.GetMetadata()[MetaStoredEventCount], 10, 64)
	return info.GetReason(), n, true
}
