package appliance

import "testing"

func TestAllHealthy(t *testing.T) {
	up := func() (bool, string) { return true, "ok" }
	down := func(why string) func() (bool, string) {
		return func() (bool, string) { return false, why }
	}
	for _, tc := range []struct {
		name   string
		checks []func() (bool, string)
		ok     bool
		detail string
	}{
		{"none", nil, true, "ok"},
		{"all up", []func() (bool, string){up, up}, true, "ok"},
		{"one down", []func() (bool, string){up, down("audit log failed")}, false, "audit log failed"},
		{"both down", []func() (bool, string){down("limits: etcd unreachable"), down("audit log failed")}, false,
			"limits: etcd unreachable; audit log failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, detail := allHealthy(tc.checks...)()
			if ok != tc.ok || detail != tc.detail {
				t.Errorf("allHealthy = %v, %q; want %v, %q", ok, detail, tc.ok, tc.detail)
			}
		})
	}
}
