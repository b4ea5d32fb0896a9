package centraltest

import (
	"context"

	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/ingest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// Publish sends u over c as an appliance does (centralclient.Publish).
func Publish(ctx context.Context, c centralv1.CentralAuditServiceClient, u ingest.Upload) (*centralv1.PublishHeadResponse, error) {
	return centralclient.Publish(ctx, c, ClientUpload(u))
}

// ClientUpload is u as an appliance sends it.
func ClientUpload(u ingest.Upload) centralclient.Upload {
	leaves := make([]centralclient.Leaf, len(u.Leaves))
	for i, l := range u.Leaves {
		leaves[i] = centralclient.Leaf(l)
	}
	return centralclient.Upload{Head: u.Head, FirstLeafIndex: u.FirstLeafIndex, Leaves: leaves, LeafRetentionDays: u.LeafRetentionDays}
}
