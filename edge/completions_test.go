package edge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/pipeline"
)

const completionsPath = "/v1/completions"

// A legacy completion is the engine's chat reply to the prompt as one user
// message: builtin/echo echoes the prompt. The bytes are OpenAI's
// text_completion, with choices[].text.
func TestCompletionPlain(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range []struct{ name, body, text, finish string }{
			{"string prompt", `{"model":"builtin/echo","prompt":"hello big world"}`, "hello big world", "stop"},
			{"list of one prompt", `{"model":"builtin/echo","prompt":["hello big world"],"temperature":0.5,"stop":["zzz"]}`, "hello big world", "stop"},
			{"max_tokens cuts with length", `{"model":"builtin/echo","prompt":"hello big world","max_tokens":2}`, "hello big", "length"},
			{"empty suffix is no suffix", `{"model":"builtin/echo","prompt":"hello big world","suffix":""}`, "hello big world", "stop"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.post(t, completionsPath, keyAll, tc.body)
				body := string(wantOK(t, r))
				completion := 3
				if tc.finish == "length" {
					completion = 2
				}
				want := fmt.Sprintf(`{"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo",`+
					`"choices":[{"text":"%s","index":0,"logprobs":null,"finish_reason":"%s"}],`+
					`"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`, r.id(), tc.text, tc.finish, completion, 3+completion)
				if body != want {
					t.Errorf("body\n got %s\nwant %s", body, want)
				}
			})
		}
	})
}

// A streamed completion is OpenAI's: text_completion chunks with a piece
// of text each and "finish_reason":null, no role chunk, a last chunk with
// empty text and the finish reason, the usage chunk with include_usage,
// then [DONE].
func TestCompletionStream(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, usage := range []bool{false, true} {
			t.Run(fmt.Sprintf("include_usage=%v", usage), func(t *testing.T) {
				body := `{"model":"builtin/echo","prompt":"hello big world","stream":true}`
				if usage {
					body = `{"model":"builtin/echo","prompt":"hello big world","stream":true,"stream_options":{"include_usage":true}}`
				}
				r := s.post(t, completionsPath, keyAll, body)
				wantStream(t, r)
				chunk := func(text, finish string) string {
					return fmt.Sprintf(`data: {"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo",`+
						`"choices":[{"text":"%s","index":0,"logprobs":null,"finish_reason":%s}]}`, r.id(), text, finish)
				}
				want := []string{chunk("hello ", "null"), chunk("big ", "null"), chunk("world", "null"), chunk("", `"stop"`)}
				if usage {
					want = append(want, fmt.Sprintf(`data: {"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo",`+
						`"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`, r.id()))
				}
				wantFrames(t, sseFrames(t, r.body), append(want, "data: [DONE]"))
			})
		}
	})
}

// What a chat cannot carry is refused by name.
func TestCompletionRefusals(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, tc := range []struct{ name, body, param string }{
		{"no prompt", `{"model":"builtin/echo"}`, "prompt"},
		{"empty prompt", `{"model":"builtin/echo","prompt":""}`, "prompt"},
		{"no prompt in the list", `{"model":"builtin/echo","prompt":[]}`, "prompt"},
		{"too many prompts", `{"model":"builtin/echo","prompt":[` + strings.Repeat(`"a",`, pipeline.MaxCompletionPrompts) + `"a"]}`, "prompt"},
		{"an empty prompt in the list", `{"model":"builtin/echo","prompt":["a",""]}`, "prompt[1]"},
		{"token ids", `{"model":"builtin/echo","prompt":[1,2,3]}`, "prompt"},
		{"lists of token ids", `{"model":"builtin/echo","prompt":[[1,2],[3]]}`, "prompt"},
		{"suffix", `{"model":"builtin/echo","prompt":"def f(","suffix":"return x"}`, "suffix"},
		{"n", `{"model":"builtin/echo","prompt":"x","n":2}`, "n"},
		{"echo", `{"model":"builtin/echo","prompt":"x","echo":true}`, "echo"},
		{"logprobs", `{"model":"builtin/echo","prompt":"x","logprobs":2}`, "logprobs"},
		{"max_tokens", `{"model":"builtin/echo","prompt":"x","max_tokens":0}`, "max_tokens"},
		{"stream_options without stream", `{"model":"builtin/echo","prompt":"x","stream_options":{"include_usage":true}}`, "stream_options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, s.post(t, completionsPath, keyAll, tc.body), http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
		})
	}
}

// A completion is governed and audited like a chat: the key's models, and
// an audit event under /v1/completions with the usage.
func TestCompletionGovernedAndAudited(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit})
	wantError(t, s.post(t, completionsPath, keyEmbed, `{"model":"builtin/echo","prompt":"hi"}`), http.StatusForbidden, "policy_denied", "policy", "")
	if ev := audit.next(t); ev.Endpoint != completionsPath || ev.Status != http.StatusForbidden {
		t.Errorf("recorded %s %d, want %s 403", ev.Endpoint, ev.Status, completionsPath)
	}
	wantOK(t, s.post(t, completionsPath, keyEcho, `{"model":"builtin/echo","prompt":"hello big world"}`))
	if ev := audit.next(t); ev.Endpoint != completionsPath || ev.Status != http.StatusOK || ev.Model != "builtin/echo" ||
		ev.PromptTokens != 3 || ev.CompletionTokens != 3 {
		t.Errorf("recorded %s %d %s %d+%d, want %s 200 builtin/echo 3+3", ev.Endpoint, ev.Status, ev.Model, ev.PromptTokens, ev.CompletionTokens, completionsPath)
	}
}

// Several prompts are one text_completion with a choice per prompt, each
// choice's index its prompt's position, and the usage summed; the most
// prompts a request may hold are answered too.
func TestCompletionSeveralPrompts(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		r := s.post(t, completionsPath, keyAll, `{"model":"builtin/echo","prompt":["hello big world","one two","x"],"max_tokens":2}`)
		body := string(wantOK(t, r))
		want := fmt.Sprintf(`{"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo","choices":[`+
			`{"text":"hello big","index":0,"logprobs":null,"finish_reason":"length"},`+
			`{"text":"one two","index":1,"logprobs":null,"finish_reason":"stop"},`+
			`{"text":"x","index":2,"logprobs":null,"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":6,"completion_tokens":5,"total_tokens":11}}`, r.id())
		if body != want {
			t.Errorf("body\n got %s\nwant %s", body, want)
		}

		prompts := make([]string, pipeline.MaxCompletionPrompts)
		for i := range prompts {
			prompts[i] = fmt.Sprintf(`"p%d"`, i)
		}
		r = s.post(t, completionsPath, keyAll, `{"model":"builtin/echo","prompt":[`+strings.Join(prompts, ",")+`]}`)
		var doc struct {
			Choices []struct {
				Text  string `json:"text"`
				Index int    `json:"index"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(wantOK(t, r), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Choices) != pipeline.MaxCompletionPrompts {
			t.Fatalf("%d choices for %d prompts", len(doc.Choices), pipeline.MaxCompletionPrompts)
		}
		for i, c := range doc.Choices {
			if c.Index != i || c.Text != fmt.Sprintf("p%d", i) {
				t.Errorf("choice %d: index %d, text %q", i, c.Index, c.Text)
			}
		}
	})
}

// Streamed, the prompts are answered one after another: every chunk of
// prompt 0 (its finish chunk last), then prompt 1's, each choice with its
// prompt's index, then one usage chunk summed over them.
func TestCompletionSeveralPromptsStream(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		r := s.post(t, completionsPath, keyAll, `{"model":"builtin/echo","prompt":["hello big world","one two"],"stream":true,"stream_options":{"include_usage":true}}`)
		wantStream(t, r)
		chunk := func(index int, text, finish string) string {
			return fmt.Sprintf(`data: {"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo",`+
				`"choices":[{"text":"%s","index":%d,"logprobs":null,"finish_reason":%s}]}`, r.id(), text, index, finish)
		}
		want := []string{
			chunk(0, "hello ", "null"), chunk(0, "big ", "null"), chunk(0, "world", "null"), chunk(0, "", `"stop"`),
			chunk(1, "one ", "null"), chunk(1, "two", "null"), chunk(1, "", `"stop"`),
			fmt.Sprintf(`data: {"id":"%s","object":"text_completion","created":1767225600,"model":"builtin/echo",`+
				`"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`, r.id()),
			"data: [DONE]",
		}
		wantFrames(t, sseFrames(t, r.body), want)
	})
}

// A completion of several prompts is one request: one audit event with
// the usage of all, plain or streamed.
func TestCompletionSeveralPromptsOneAuditEvent(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit})
	for _, stream := range []string{"false", "true"} {
		r := s.post(t, completionsPath, keyEcho, `{"model":"builtin/echo","prompt":["hello big world","one two"],"stream":`+stream+`}`)
		if stream == "true" {
			wantStream(t, r)
		} else {
			wantOK(t, r)
		}
		ev := audit.next(t)
		if ev.Endpoint != completionsPath || ev.Status != http.StatusOK || ev.Model != "builtin/echo" || ev.PromptTokens != 5 || ev.CompletionTokens != 5 {
			t.Errorf("stream %s: recorded %s %d %s %d+%d, want %s 200 builtin/echo 5+5", stream, ev.Endpoint, ev.Status, ev.Model, ev.PromptTokens, ev.CompletionTokens, completionsPath)
		}
		if n := len(audit.events); n != 0 {
			t.Errorf("stream %s: %d more events recorded for one request", stream, n)
		}
	}
}
