package edge

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// chunkStrings are texts that exercise every escape of encoding/json.
var chunkStrings = []string{
	"", "hello ", "world", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\ffeed",
	"\x00\x01\x1f\x7f", "é ü 日本語 🙂", "line\u2028sep\u2029para", "bad \xff utf8 \xe2\x82", `{"city":"Paris"}`,
}

// nullUsage is a chunk of a stream with include_usage: "usage":null, which
// openai.ChatCompletionChunk cannot hold, in the place of its Usage.
type nullUsage struct {
	openai.ChatCompletionChunk
	Usage *struct{} `json:"usage"`
}

// The hand-written chunk encoder writes exactly what encoding/json writes
// for the openai.ChatCompletionChunk wire struct.
func TestChunkEncoderMatchesEncodingJSON(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		enc := newChunkEncoder("req_abc<&>", 1790000000, "builtin/echo", includeUsage)
		ref := openai.ChatCompletionChunk{ID: "req_abc<&>", Object: openai.ObjectChatCompletionChunk, Created: 1790000000, Model: "builtin/echo"}
		want := func(d openai.Delta, finish *string) string {
			c := ref
			c.Choices = []openai.ChunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
			if includeUsage {
				return string(mustMarshal(nullUsage{ChatCompletionChunk: c}))
			}
			return string(mustMarshal(c))
		}
		check := func(name string, got []byte, want string) {
			t.Helper()
			if string(got) != want {
				t.Errorf("include_usage=%v %s:\n got %s\nwant %s", includeUsage, name, got, want)
			}
		}

		empty := ""
		check("role", enc.role(), want(openai.Delta{Role: openai.RoleAssistant, Content: &empty}, nil))
		for _, s := range chunkStrings {
			check("content "+s, enc.content(s), want(openai.Delta{Content: &s}, nil))
			if s != "" { // an empty piece of reasoning is never sent
				check("reasoning "+s, enc.reasoning(s), want(openai.Delta{Reasoning: &s}, nil))
			}
			check("tool call opening "+s, enc.toolCall(3, "call_"+s, s+"name", s),
				want(openai.Delta{ToolCalls: []openai.ToolCallDelta{{Index: 3, ID: "call_" + s, Type: openai.ToolTypeFunction, Function: openai.FunctionDelta{Name: s + "name", Arguments: s}}}}, nil))
			opening := string(mustMarshal(openai.ToolCallDelta{Index: 3, ID: "call_" + s, Type: openai.ToolTypeFunction, Function: openai.FunctionDelta{Name: s + "name", Arguments: s}}))
			// The role chunk of a reply opening with a tool call: the
			// struct's omitempty cannot write "content":null.
			check("role and tool call "+s, enc.roleToolCall(3, "call_"+s, s+"name", s),
				strings.Replace(want(openai.Delta{Role: openai.RoleAssistant, ToolCalls: []openai.ToolCallDelta{{}}}, nil),
					`"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":""}}]`,
					`"role":"assistant","content":null,"tool_calls":[`+opening+`]`, 1))
			check("tool call arguments "+s, enc.toolCall(0, "", "", s),
				want(openai.Delta{ToolCalls: []openai.ToolCallDelta{{Index: 0, Function: openai.FunctionDelta{Arguments: s}}}}, nil))
		}
		for _, reason := range []string{openai.FinishStop, openai.FinishLength, openai.FinishToolCalls, openai.FinishContentFilter} {
			check("finish "+reason, enc.finish(reason), want(openai.Delta{}, &reason))
		}
		u := openai.Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}
		last := ref
		last.Choices, last.Usage = []openai.ChunkChoice{}, &u
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
	c := nullUsage{ChatCompletionChunk: openai.ChatCompletionChunk{ID: "req_0123456789abcdefghjkmnpq", Object: openai.ObjectChatCompletionChunk, Created: 1790000000, Model: "builtin/echo"}}
	b.ReportAllocs()
	for b.Loop() {
		text := "hello "
		c.Choices = []openai.ChunkChoice{{Delta: openai.Delta{Content: &text}}}
		_ = mustMarshal(&c)
	}
}
