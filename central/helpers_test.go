package central_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/clocktest"
)

func storeTree(tr *centraltest.Tree) store.TreeID {
	return store.TreeID{TenantID: tr.Tenant, ApplianceID: tr.App.ID, Day: tr.Day}
}

// startPrunedPlane starts a plane whose retention passes the test runs:
// its clock is the test's, and pass(at) sets the clock to at, runs a pass
// and returns what it pruned. The pass at start has run, pruning nothing.
// configure, when set, changes the plane's configuration further.
// olderPlane is a store as a central plane before this one committed to
// it: with the appliance's body retention (days, by tree) as the leaves'
// retention, so that their leaves are pruned before their heads. An
// upgraded store still holds such trees.
type olderPlane struct {
	store.Store
	days func(store.TreeID) int
}

func (o olderPlane) Commit(ctx context.Context, c store.Commit) error {
	c.LeafRetentionDays = o.days(store.TreeOf(c.Head))
	return o.Store.Commit(ctx, c)
}

// committedByOlderPlane is a configuration whose store commits as
// olderPlane does.
func committedByOlderPlane(days func(store.TreeID) int) func(*central.Config) {
	return func(c *central.Config) { c.Store = olderPlane{Store: c.Store, days: days} }
}

func startPrunedPlane(t *testing.T, configure func(*central.Config)) (p *centraltest.Plane, pass func(at time.Time) store.Pruned) {
	t.Helper()
	clock := clocktest.New(time.Now())
	ticks := make(chan time.Time)
	passes := make(chan store.Pruned)
	p = centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.Now = clock.Now
		c.PruneTicks = ticks
		c.OnPrune = func(pr store.Pruned, err error) {
			if err != nil {
				t.Errorf("prune: %v", err)
			}
			passes <- pr
		}
		if configure != nil {
			configure(c)
		}
	})
	if got := <-passes; got != (store.Pruned{}) {
		t.Fatalf("the pass at start: %+v", got)
	}
	return p, func(at time.Time) store.Pruned {
		clock.Set(at)
		ticks <- at
		return <-passes
	}
}
