// Package policy decides whether a gateway request may proceed and which of
// its tools may reach the model.
//
// A decision has two stages. First, in Go and always: the key must allow the
// model, every function tool the request offers (and a tool named by
// tool_choice) must be covered by a tool:<name> or tool:* scope of the key.
// A custom policy bundle therefore cannot drop the scope check by mistake.
// Second, the active Open Policy Agent bundle is evaluated
// (data.tollgate.gateway.decision); it may deny the request or narrow the
// set of tools exposed, never widen it.
//
// Bundles are a directory or an OPA bundle tarball, optionally signed with
// OPA's bundle signing. Each is compiled once into a prepared query; the
// active bundle is swapped atomically, so decisions in flight finish on the
// bundle they started with, and a bundle that fails to read, verify or
// compile is refused while the previous one stays active.
//
// The input and output documents are described in docs/policy.md.
package policy
