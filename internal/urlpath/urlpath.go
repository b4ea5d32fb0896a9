// Package urlpath holds the rule both HTTP fronts (the appliance's edge and
// the central plane's REST API) apply to request paths before routing.
package urlpath

import "path"

// Canonical reports whether p, a request's escaped path, is already as
// http.ServeMux would clean it: rooted, without empty, '.' or '..'
// segments (a trailing slash kept). ServeMux answers any other path with a
// redirect to its cleaned form, outside the error envelope; the fronts
// answer 404 instead.
func Canonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c == p
}
