package ingest

import (
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/central/centralclient"
)

// Class says why a head was refused, and so which gRPC code it maps to.
type Class int

const (
	// Invalid: the head or its leaves are wrong (InvalidArgument).
	Invalid Class = iota + 1
	// Denied: the head is not the caller's to publish (PermissionDenied).
	Denied
	// Precondition: the head does not fit what is stored
	// (FailedPrecondition); the appliance can resend differently.
	Precondition
	// Conflict: the tree changed concurrently; retry (Aborted).
	Conflict
)

// Reasons of a Refusal, carried to the appliance in a google.rpc.ErrorInfo:
// the PublishHead RPC's, defined with its client.
const (
	ReasonInvalidHead        = centralclient.ReasonInvalidHead
	ReasonCertificate        = centralclient.ReasonCertificate
	ReasonSignature          = centralclient.ReasonSignature
	ReasonApplianceMismatch  = centralclient.ReasonApplianceMismatch
	ReasonFromFuture         = centralclient.ReasonFromFuture
	ReasonInvalidLeaves      = centralclient.ReasonInvalidLeaves
	ReasonLeafMismatch       = centralclient.ReasonLeafMismatch
	ReasonRootMismatch       = centralclient.ReasonRootMismatch
	ReasonInconsistent       = centralclient.ReasonInconsistent
	ReasonDuplicateRequestID = centralclient.ReasonDuplicateRequestID
	ReasonLeafGap            = centralclient.ReasonLeafGap
	ReasonStaleHead          = centralclient.ReasonStaleHead
	ReasonTreeFinal          = centralclient.ReasonTreeFinal
	ReasonLeavesPruned       = centralclient.ReasonLeavesPruned
	ReasonConflict           = centralclient.ReasonConflict
)

// Reasons are every reason of a Refusal, a bounded set (metrics label
// their refusals with it).
var Reasons = []string{
	ReasonInvalidHead, ReasonCertificate, ReasonSignature, ReasonApplianceMismatch, ReasonFromFuture,
	ReasonInvalidLeaves, ReasonLeafMismatch, ReasonRootMismatch, ReasonInconsistent, ReasonDuplicateRequestID,
	ReasonLeafGap, ReasonStaleHead, ReasonTreeFinal, ReasonLeavesPruned, ReasonConflict,
}

// Refusal is why a head was not stored. Nothing of its tree was changed;
// only the evidence of a fork (ReasonInconsistent) is kept.
type Refusal struct {
	Class  Class
	Reason string
	// StoredEventCount is the event_count of the tree's latest stored head
	// (0 when none); with ReasonLeafGap the appliance resends leaves from
	// there.
	StoredEventCount uint64
	// Evidence, for ReasonInconsistent, is what became of the fork's
	// evidence (Evidence…; empty when it is not kept).
	Evidence string
	Err      error
}

func (r *Refusal) Error() string { return "head refused (" + r.Reason + "): " + r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

func refuse(c Class, reason string, format string, args ...any) *Refusal {
	return &Refusal{Class: c, Reason: reason, Err: fmt.Errorf(format, args...)}
}

// AsRefusal returns the Refusal in err's chain, if any.
func AsRefusal(err error) (*Refusal, bool) {
	return errors.AsType[*Refusal](err)
}
