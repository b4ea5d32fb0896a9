package policy

import (
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// inputField is one field of the input document (docs/policy.md) whose
// value can differ between two decisions. input.version is not one: it is
// the same for every decision.
type inputField uint8

const (
	fieldApplianceID inputField = iota
	fieldTime
	fieldTimeNS
	fieldKeyTenantID
	fieldKeyID
	fieldKeyLabel
	fieldKeyScopes
	fieldKeyAllModels
	fieldKeyModels
	fieldRequestID
	fieldEndpoint
	fieldModel
	fieldStream
	fieldTools
	fieldToolChoice
	fieldMessageCount
	fieldTemperature
	fieldMaxTokens
	fieldEffort
	numFields
)

// fieldSet is a set of inputFields, one bit each.
type fieldSet uint32

func fields(fs ...inputField) fieldSet {
	var s fieldSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

func (s fieldSet) has(f inputField) bool { return s&(1<<f) != 0 }

// perRequestFields differ for every request: a bundle that reads one of
// them can never reuse a decision, so its decisions are not memoized.
var perRequestFields = fields(fieldTime, fieldTimeNS, fieldRequestID)

// schemaNode is a field or an object of the input document. A leaf
// (no children) stands for its whole value: a reference into it (an
// element of input.request.tools, input.request.tool_choice.mode) reads
// the leaf's field.
type schemaNode struct {
	fields   fieldSet
	children map[string]*schemaNode
}

func leaf(fs ...inputField) *schemaNode { return &schemaNode{fields: fields(fs...)} }

func object(children map[string]*schemaNode) *schemaNode {
	n := &schemaNode{children: children}
	for _, c := range children {
		n.fields |= c.fields
	}
	return n
}

// inputSchema is the input document, version 1, as the fields a reference
// reads. Keep it equal to what inputDoc.fill builds: TestInputSchema
// compares the two. A reference to a name that is not here makes a bundle
// unmemoized (planMemo), so a field added to the document but not here
// costs memoization, never correctness.
var inputSchema = object(map[string]*schemaNode{
	"version":      leaf(),
	"appliance_id": leaf(fieldApplianceID),
	"time":         leaf(fieldTime),
	"time_ns":      leaf(fieldTimeNS),
	"key": object(map[string]*schemaNode{
		"tenant_id":  leaf(fieldKeyTenantID),
		"key_id":     leaf(fieldKeyID),
		"label":      leaf(fieldKeyLabel),
		"scopes":     leaf(fieldKeyScopes),
		"all_models": leaf(fieldKeyAllModels),
		"models":     leaf(fieldKeyModels),
	}),
	"request": object(map[string]*schemaNode{
		"id":               leaf(fieldRequestID),
		"endpoint":         leaf(fieldEndpoint),
		"model":            leaf(fieldModel),
		"stream":           leaf(fieldStream),
		"tools":            leaf(fieldTools),
		"tool_choice":      leaf(fieldToolChoice),
		"message_count":    leaf(fieldMessageCount),
		"temperature":      leaf(fieldTemperature),
		"max_tokens":       leaf(fieldMaxTokens),
		"reasoning_effort": leaf(fieldEffort),
	}),
})

// fieldsRead returns the fields a reference to input reads, given the
// elements after input. An element that is not a constant string (a
// variable: input.request[k]) reads the whole object it indexes. ok is
// false when the reference names something the document does not have;
// name is then that reference, for the log.
func fieldsRead(path ast.Ref) (read fieldSet, ok bool) {
	n := inputSchema
	for _, t := range path {
		if n.children == nil {
			return n.fields, true
		}
		s, isStr := t.Value.(ast.String)
		if !isStr {
			return n.fields, true
		}
		c := n.children[string(s)]
		if c == nil {
			return 0, false
		}
		n = c
	}
	return n.fields, true
}

// names lists the fields of s as input paths, for log lines and tests.
func (s fieldSet) names() string {
	var out []string
	var walk func(prefix string, n *schemaNode)
	walk = func(prefix string, n *schemaNode) {
		if n.children == nil {
			if n.fields&s != 0 {
				out = append(out, prefix)
			}
			return
		}
		for name, c := range n.children {
			walk(prefix+"."+name, c)
		}
	}
	walk("input", inputSchema)
	slices.Sort(out)
	return strings.Join(out, ",")
}
