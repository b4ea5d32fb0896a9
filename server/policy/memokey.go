package policy

import (
	"encoding/binary"
	"math"

	"github.com/open-policy-agent/opa/v1/ast"
)

// appendKey appends to dst the memo key of a decision: the values of the
// fields in read, each as its field number followed by a length-prefixed
// or fixed-size encoding, in field order. So two keys are equal exactly
// when the inputs agree on every field read; the memo compares whole
// keys, never hashes alone.
//
// The values are taken from the Input, not from the input document: the
// document is a function of them (inputDoc.fill, keyTerm), so inputs equal
// here give the bundle equal documents on those fields, and building the
// document is what a memoized decision saves. Only input.key.models comes
// from the document, models (sorted there, a set in the Principal). ok is
// false for a field that has no encoding here (the per-request ones,
// which a memoized bundle never reads): the decision is then evaluated.
func appendKey(dst []byte, read fieldSet, in *Input, tc ToolChoice, models *ast.Array) (_ []byte, ok bool) {
	r, k := &in.Request, in.Key
	for f := range numFields {
		if !read.has(f) {
			continue
		}
		dst = append(dst, byte(f))
		switch f {
		case fieldApplianceID:
			dst = appendString(dst, in.ApplianceID)
		case fieldKeyTenantID:
			dst = appendString(dst, k.TenantID)
		case fieldKeyID:
			dst = appendString(dst, k.KeyID)
		case fieldKeyLabel:
			dst = appendString(dst, k.Label)
		case fieldKeyScopes:
			dst = appendStrings(dst, k.Scopes)
		case fieldKeyAllModels:
			dst = appendBool(dst, k.AllModels)
		case fieldKeyModels:
			if models == nil {
				return dst, false
			}
			dst = binary.AppendUvarint(dst, uint64(models.Len()))
			for i := range models.Len() {
				s, isStr := models.Elem(i).Value.(ast.String)
				if !isStr {
					return dst, false
				}
				dst = appendString(dst, string(s))
			}
		case fieldEndpoint:
			dst = appendString(dst, string(r.Endpoint))
		case fieldModel:
			dst = appendString(dst, r.Model)
		case fieldStream:
			dst = appendBool(dst, r.Stream)
		case fieldTools:
			dst = appendStrings(dst, r.Tools)
		case fieldToolChoice:
			dst = appendString(dst, string(tc.Mode))
			dst = appendString(dst, tc.Name)
		case fieldMessageCount:
			dst = binary.AppendVarint(dst, int64(r.MessageCount))
		case fieldTemperature:
			dst = appendBool(dst, r.Temperature != nil)
			if r.Temperature != nil {
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(*r.Temperature))
			}
		case fieldMaxTokens:
			dst = appendBool(dst, r.MaxTokens != nil)
			if r.MaxTokens != nil {
				dst = binary.AppendVarint(dst, *r.MaxTokens)
			}
		case fieldEffort:
			dst = appendBool(dst, r.ReasoningEffort != nil)
			if r.ReasoningEffort != nil {
				dst = appendString(dst, *r.ReasoningEffort)
			}
		default:
			return dst, false
		}
	}
	return dst, true
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// keyModels is input.key.models of a key term built by keyTerm.
func keyModels(key *ast.Term) *ast.Array {
	obj, ok := key.Value.(ast.Object)
	if !ok {
		return nil
	}
	m := obj.Get(kModels)
	if m == nil {
		return nil
	}
	a, _ := m.Value.(*ast.Array)
	return a
}
