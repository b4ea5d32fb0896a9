package urlpath

import "testing"

func TestCanonical(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/v1/models": true, "/v1/models/": true, "/v1/models/org%2F%2Fm": true,
		"": false, "*": false, "v1/models": false, "//v1/models": false, "/v1//models": false,
		"/v1/./models": false, "/v1/x/../models": false, "/v1/models/.": false, "/v1/models//": false,
	} {
		if got := Canonical(p); got != want {
			t.Errorf("Canonical(%q) = %t, want %t", p, got, want)
		}
	}
}
