package central_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centralclient"
)

// TestForwarderKeepaliveIsPermitted: an appliance's connection (its
// forwarder's, centralclient.Keepalive) pings, so that it finds a dead
// link, but no more often than the ingest listener permits (with or
// without an upload in progress), which would otherwise close it with
// GOAWAY too_many_pings.
func TestForwarderKeepaliveIsPermitted(t *testing.T) {
	ka := centralclient.Keepalive
	if ka.Time < central.IngestPingMinTime {
		t.Errorf("the forwarder pings every %s, the ingest listener permits one every %s at most", ka.Time, central.IngestPingMinTime)
	}
	if ka.Time <= 0 || ka.Timeout <= 0 {
		t.Errorf("centralclient.Keepalive %+v: the forwarder would not find a dead link", ka)
	}
}
