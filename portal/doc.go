// Package portal is the operator portal: the web pages where a tenant's
// administrators sign in, create virtual keys (the secret is shown once),
// list them and revoke them. It serves server-rendered HTML with no
// script, keeps administrator accounts and sessions in etcd beside the
// key records, and calls the keys store for everything about keys.
//
// Decisions (accounts, sessions, CSRF, throttling, TLS) are in
// docs/portal.md.
package portal
