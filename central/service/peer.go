package service

import (
	"context"
	"crypto/x509"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// applianceOf returns the appliance id of the caller's verified mTLS
// certificate, checked against the fleet CA now.
func applianceOf(ctx context.Context, ca *x509.Certificate, now time.Time) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", status.Error(codes.Unauthenticated, "publishing needs mTLS with a fleet appliance certificate")
	}
	id, err := fleet.Verify(info.State.VerifiedChains[0][:1], ca, now)
	if err != nil {
		return "", status.Error(codes.Unauthenticated, err.Error())
	}
	return id, nil
}
