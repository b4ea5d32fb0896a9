package vllmfake

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// VocabSize is the size of the fake tokenizer's vocabulary.
const VocabSize = 32000

// BOS is the token the tokenizer adds in front when asked to add special
// tokens (add_special_tokens), with its string.
const (
	BOS    = 1
	BOSStr = "<s>"
)

// Tokenize is the fake's tokenizer: each run of non-whitespace is one
// token, its id the FNV-1a 32-bit hash of the run modulo VocabSize. It
// returns the ids and the strings.
func Tokenize(text string) ([]int, []string) {
	strs := strings.Fields(text)
	ids := make([]int, len(strs))
	for i, s := range strs {
		ids[i] = TokenID(s)
	}
	return ids, strs
}

// TokenID is the id of one token string.
func TokenID(tok string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tok))
	return int(h.Sum32() % VocabSize)
}

// message is a chat message as the template reads it.
type message struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
	// Reasoning of an earlier assistant turn (vLLM reads `reasoning`).
	Reasoning string `json:"reasoning"`
}

// text is the message's content: a string as it is, a list of parts as
// their text parts joined by "\n" (vLLM's "string" content format).
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []openai.ContentPart
	if json.Unmarshal(m.Content, &parts) == nil {
		var texts []string
		for _, p := range parts {
			if p.Type == openai.ContentPartText {
				var text string // null reads as ""
				if p.Text != nil {
					text = *p.Text
				}
				texts = append(texts, text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// Template is the fake's chat template, rendering what the request holds
// as vLLM hands it to the model's template:
//
//	Reasoning: <reasoning_effort>\n         (when the options set it, as gpt-oss's)
//	<|tools|>\n<tool as compact JSON>\n      (each tool, when there are tools)
//	<|ROLE|>\n<content>\n                    (each message)
//	<|tool_calls|>\n<compact JSON>\n         (after a message with tool_calls)
//	<|assistant|>\n                          (when add_generation_prompt)
//	<think>\n\n</think>\n\n                 (then, with enable_thinking false)
//
// An assistant message's reasoning is rendered in <think>…</think> before
// its content. The chat template options (kwargs) it knows are Qwen3's
// enable_thinking (false closes the thinking in the prompt, and a reasoning
// model then answers without it) and reasoning_effort, a string, which a
// completion's reasoning_effort puts there (see CompletionKwargs).
//
// The same rendering serves /tokenize and chat completions, so the token
// count of /tokenize (chat form, add_special_tokens false) equals a chat
// completion's usage.prompt_tokens for the same messages, tools and
// template options, as on a real vLLM.
func Template(messages []json.RawMessage, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) string {
	var b strings.Builder
	if effort, ok := kwargs["reasoning_effort"].(string); ok {
		b.WriteString("Reasoning: " + effort + "\n")
	}
	if len(tools) > 0 {
		b.WriteString("<|tools|>\n")
		for _, t := range tools {
			b.WriteString(compact(t) + "\n")
		}
	}
	for _, raw := range messages {
		var m message
		_ = json.Unmarshal(raw, &m)
		b.WriteString("<|" + m.Role + "|>\n")
		if m.Reasoning != "" {
			// A template that keeps earlier turns' thinking.
			b.WriteString(thinkOpen + m.Reasoning + thinkClose + "\n")
		}
		b.WriteString(m.text() + "\n")
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			b.WriteString("<|tool_calls|>\n" + compact(m.ToolCalls) + "\n")
		}
	}
	if addGenerationPrompt {
		b.WriteString("<|assistant|>\n")
		if !thinking(kwargs) {
			b.WriteString(thinkOpen + "\n\n" + thinkClose + "\n\n")
		}
	}
	return b.String()
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// promptTokens tokenises a prompt, with BOS in front when asked.
func promptTokens(prompt string, addSpecial bool) ([]int, []string) {
	ids, strs := Tokenize(prompt)
	if addSpecial {
		ids = append([]int{BOS}, ids...)
		strs = append([]string{BOSStr}, strs...)
	}
	return ids, strs
}

// tokenizeRequest is vLLM's TokenizeCompletionRequest or
// TokenizeChatRequest. The chat form has no reasoning_effort: a client
// that wants the completion's prompt counted puts it, and the
// enable_thinking it implies, in chat_template_kwargs itself.
type tokenizeRequest struct {
	Model               *string           `json:"model"`
	Prompt              *string           `json:"prompt"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ContinueFinal       *bool             `json:"continue_final_message"`
	AddSpecialTokens    *bool             `json:"add_special_tokens"`
	ReturnTokenStrs     *bool             `json:"return_token_strs"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// thinking reports whether the template options leave thinking on (Qwen3's
// enable_thinking, true unless set false).
func thinking(kwargs map[string]any) bool {
	on, set := kwargs["enable_thinking"].(bool)
	return !set || on
}

// handleTokenize is POST /tokenize, both of vLLM's forms: completion
// ({"prompt"}, add_special_tokens defaulting to true) and chat
// ({"messages", "tools"?}, add_generation_prompt defaulting to true,
// add_special_tokens to false). It answers {"count","max_model_len",
// "tokens","token_strs"}, token_strs null unless return_token_strs.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request, body []byte) {
	if !checkJSONRequest(w, r) {
		return
	}
	var req tokenizeRequest
	if !decode(w, body, &req) {
		return
	}
	chat := req.Messages != nil
	if !chat && req.Prompt == nil {
		// Neither union branch fits: pydantic reports both.
		writeValidation(w, missing("prompt", body), missing("messages", body))
		return
	}
	if chat && boolOr(req.ContinueFinal, false) && boolOr(req.AddGenerationPrompt, false) {
		writeValidation(w, valueError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.", body))
		return
	}
	m, ok := s.model(req.Model, false)
	if !ok && req.Model == nil {
		m, ok = s.served()[0], true // an embedding-only server tokenizes too
	}
	if !ok {
		writeError(w, http.StatusNotFound, "The model `"+*req.Model+"` does not exist.", "model")
		return
	}
	var ids []int
	var strs []string
	if chat {
		prompt := Template(req.Messages, req.Tools, boolOr(req.AddGenerationPrompt, true), req.ChatTemplateKwargs)
		ids, strs = promptTokens(prompt, boolOr(req.AddSpecialTokens, false))
	} else {
		ids, strs = promptTokens(*req.Prompt, boolOr(req.AddSpecialTokens, true))
	}
	var tokenStrs any
	if boolOr(req.ReturnTokenStrs, false) {
		tokenStrs = strs
	}
	writeJSON(w, http.StatusOK, obj{
		{"count", len(ids)},
		{"max_model_len", m.maxLen()},
		{"tokens", ids},
		{"token_strs", tokenStrs},
	})
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
