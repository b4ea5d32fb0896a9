package openai

import "testing"

// FuzzAppendRaw holds a raw member's compaction to encoding/json's for any
// bytes: the same bytes, or both refuse them.
func FuzzAppendRaw(f *testing.F) {
	for _, raw := range rawCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(sameRawAsEncodingJSON)
}
