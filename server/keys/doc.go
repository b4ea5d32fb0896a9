// Package keys stores virtual keys in etcd and authenticates their secrets.
//
// A key record is written by the Store and read on the request hot path
// from the Cache, an in-memory view each gateway keeps in step with etcd
// through a watch. Secrets are never stored: a record holds the SHA-256 of
// its secret and a short hint for display.
//
// # etcd layout
//
//	/tollgate/keys/<tenant_id>/<key_id>     JSON record (see record)
//	/tollgate/key-labels/<tenant_id>/<label> key_id, the label index
//
// The label index makes labels unique per tenant: a record and its index
// entry are created in one transaction that requires the label to be free.
// The Cache watches the record prefix only.
package keys
