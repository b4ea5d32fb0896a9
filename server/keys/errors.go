package keys

import "errors"

// Sentinel errors of the Store. They are returned wrapped with context; test
// for them with errors.Is. The gRPC service maps them to status codes.
var (
	// ErrNotFound: the tenant has no such key (or label).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the tenant already has a key with that label.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalid: a spec, secret or page token breaks the rules of this
	// package (the same rules the proto constraints state).
	ErrInvalid = errors.New("invalid argument")
)
