package appliance

import "strings"

// allHealthy is healthy when every check is; otherwise its detail joins
// the details of the checks that failed, in order.
func allHealthy(checks ...func() (bool, string)) func() (bool, string) {
	return func() (bool, string) {
		var failed []string
		for _, check := range checks {
			if ok, detail := check(); !ok {
				failed = append(failed, detail)
			}
		}
		if len(failed) > 0 {
			return false, strings.Join(failed, "; ")
		}
		return true, "ok"
	}
}
