package vllm

import (
	"encoding/json"
	"testing"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// The raw members the engine writes by hand are encoding/json's bytes of
// the structs they stand for, for strings with every escape.
func TestRawMembersMatchEncodingJSON(t *testing.T) {
	texts := []string{"", "hello", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\x00\x1f",
		"é 日本語 🙂", "line\u2028sep\u2029para", "bad \xff utf8"}
	for n := range len(texts) + 1 {
		seqs := texts[:n]
		parts := make([]*inferencev1.ContentPart, n)
		want := make([]openai.ContentPart, n)
		for i, s := range seqs {
			parts[i] = &inferencev1.ContentPart{Text: s}
			want[i] = openai.ContentPart{Type: openai.ContentPartText, Text: &seqs[i]}
		}
		equal(t, "parts", textParts(parts), want)
		if n > 0 {
			equal(t, "stop", stop(seqs), seqs)
		}
	}
	for _, s := range texts {
		equal(t, "tool_choice", namedToolChoice(s),
			openai.NamedToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolChoiceFunction{Name: s}})
	}
}

func equal(t *testing.T, what string, got []byte, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}
