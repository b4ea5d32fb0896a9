package central_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central"
)

// TestIngestEndsUploadsPastMaxTime: an upload that has not closed within
// IngestMaxUploadTime of its start is ended, although no wait for one
// message reaches the idle timeout (an hour here), with DeadlineExceeded
// (which the forwarder retries), logged with the appliance, and its share
// of the budget is free again: an upload that needs the only slot and
// every pending leaf is then stored. Before, an upload that sent a
// message just inside the idle timeout each time could last for ever.
func TestIngestEndsUploadsPastMaxTime(t *testing.T) {
	for _, stall := range []string{"after start", "after a leaf chunk"} {
		t.Run(stall, func(t *testing.T) {
			endedUploadFreesItsShare(t, func(c *central.Config) {
				c.IngestIdleTimeout = time.Hour
				c.IngestMaxUploadTime = 200 * time.Millisecond
			}, stall, "took longer than 200ms",
				"level=WARN msg=\"central: upload ended, took too long\" appliance_id=app_one max_upload_time=200ms")
		})
	}
}
