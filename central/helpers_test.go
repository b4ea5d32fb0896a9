package central_test

import (
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
)

func storeTree(tr *centraltest.Tree) store.TreeID {
	return store.TreeID{TenantID: tr.Tenant, ApplianceID: tr.App.ID, Day: tr.Day}
}
