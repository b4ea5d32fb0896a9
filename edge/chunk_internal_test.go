package edge

import (
	"encoding/json"
	"testing"
)

// chunkStrings are texts that exercise every escape of encoding/json.
var chunkStrings = []string{
	"", "hello ", "world", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\ffeed",
	"\x00\x01\x1f\x7f", "é ü 日本語 🙂", "line\u2028sep\u2029para", "bad \xff utf8 \xe2\x82", `{"city":"Paris"}`,
}

// The hand-written chunk encoder writes exactly what encoding/json writes
// for the chatChunk wire structs.
func TestChunkEncoderMatchesEncodingJSON(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		enc := newChunkEncoder("req_abc<&>", 1790000000, "builtin/echo", includeUsage)
		ref := chatChunk{ID: "req_abc<&>", Object: "chat.completion.chunk", Created: 1790000000, Model: "builtin/echo"}
		if includeUsage {
			ref.Usage = json.RawMessage("null")
		}
		want := func(d delta, finish *string) string {
			c := ref
			c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
			return string(mustMarshal(c))
		}
		check := func(name string, got []byte, want string) {
			t.Helper()
			if string(got) != want {
				t.Errorf("include_usage=%v %s:\n got %s\nwant %s", includeUsage, name, got, want)
			}
		}

		empty := ""
		check("role", enc.role(), want(delta{Role: "assistant", Content: &empty}, nil))
		for _, s := range chunkStrings {
			check("content "+s, enc.content(s), want(delta{Content: &s}, nil))
			if s != "" { // an empty piece of reasoning is never sent
				check("reasoning "+s, enc.reasoning(s), want(delta{Reasoning: s}, nil))
			}
			check("tool call opening "+s, enc.toolCall(3, "call_"+s, s+"name", s),
				want(delta{ToolCalls: []toolCallDelta{{Index: 3, ID: "call_" + s, Type: "function", Function: functionDelta{Name: s + "name", Arguments: s}}}}, nil))
			check("tool call arguments "+s, enc.toolCall(0, "", "", s),
				want(delta{ToolCalls: []toolCallDelta{{Index: 0, Function: functionDelta{Arguments: s}}}}, nil))
		}
		for _, reason := range []string{"stop", "length", "tool_calls", "content_filter"} {
			check("finish "+reason, enc.finish(reason), want(delta{}, &reason))
		}
		u := usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}
		last := ref
		last.Choices, last.Usage = []chunkChoice{}, mustMarshal(u)
		check("usage", enc.usage(u), string(mustMarshal(last)))
	}
}

func BenchmarkChunkEncoder(b *testing.B) {
	enc := newChunkEncoder("req_0123456789abcdefghjkmnpq", 1790000000, "builtin/echo", true)
	b.ReportAllocs()
	for b.Loop() {
		_ = enc.content("hello ")
	}
}

func BenchmarkChunkEncodingJSON(b *testing.B) {
	c := chatChunk{ID: "req_0123456789abcdefghjkmnpq", Object: "chat.completion.chunk", Created: 1790000000, Model: "builtin/echo", Usage: json.RawMessage("null")}
	b.ReportAllocs()
	for b.Loop() {
		text := "hello "
		c.Choices = []chunkChoice{{Delta: delta{Content: &text}}}
		_ = mustMarshal(&c)
	}
}
