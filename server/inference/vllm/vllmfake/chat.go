package vllmfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// chatRequest is a chat request as vLLM's ChatCompletionRequest model
// reads it: the members the fake uses, the ones whose checks it copies from
// pydantic kept raw, and pointers where vLLM tells absent from null. It is
// not openai.ChatCompletionRequest, which is typed for the gateway's own
// checks: decoding into it would make the fake accept and refuse requests
// otherwise than vLLM (internal/openai's package doc).
type chatRequest struct {
	Model               *string           `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Stop                json.RawMessage   `json:"stop"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	Seed                *int64            `json:"seed"`
	N                   *int              `json:"n"`
	Stream              *bool             `json:"stream"`
	StreamOptions       json.RawMessage   `json:"stream_options"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	AddGenerationPrompt *bool          `json:"add_generation_prompt"`
	AddSpecialTokens    *bool          `json:"add_special_tokens"`
	ChatTemplateKwargs  map[string]any `json:"chat_template_kwargs"`
	// ReasoningEffort is one of reasoningEfforts, or null; checked in
	// handleChat, as pydantic checks a Literal.
	ReasoningEffort json.RawMessage `json:"reasoning_effort"`
}

// reasoningEfforts are the values of vLLM's reasoning_effort, OpenAI's
// seven ("max" is, in vLLM's words, DeepSeek V4's).
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// CompletionKwargs are the chat template options of a chat completion, as
// vLLM's ChatCompletionRequest.build_chat_params merges them: the client's
// chat_template_kwargs, reasoning_effort over them when it is set (nil:
// not), and then, unless the client's options hold enable_thinking,
// enable_thinking false for the effort "none" and true for any other.
// /tokenize does none of this: its template gets the client's
// chat_template_kwargs as they are.
func CompletionKwargs(client map[string]any, effort *string) map[string]any {
	if effort == nil {
		return client
	}
	out := make(map[string]any, len(client)+2)
	for k, v := range client {
		out[k] = v
	}
	out["reasoning_effort"] = *effort
	if _, set := client["enable_thinking"]; !set {
		out["enable_thinking"] = *effort != "none"
	}
	return out
}

// reasoningEffort reads reasoning_effort as pydantic reads vLLM's Literal:
// absent or null is none; anything but one of reasoningEfforts is a
// literal_error.
func reasoningEffort(raw json.RawMessage, body []byte) (*string, *validationError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && slices.Contains(reasoningEfforts, s) {
		return &s, nil
	}
	quoted := make([]string, len(reasoningEfforts))
	for i, v := range reasoningEfforts {
		quoted[i] = "'" + v + "'"
	}
	expected := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	return nil, &validationError{
		typ: "literal_error", loc: "body.reasoning_effort", msg: "Input should be " + expected,
		input: fieldInput(body, "reasoning_effort"), ctx: "{'expected': " + pyRepr(expected) + "}",
	}
}

// step is one generated token: the text it adds to the reply and, on the
// last one, why generation finished.
type step struct {
	text       string
	finish     string // "" until the last step
	stopReason any    // the matched stop string, or nil (EOS, length)
	// reasoning: a token of the thinking, which the reasoning parser
	// returns as `reasoning`; silent: one it returns nothing for (the
	// closing think tag), so that no chunk is sent for it.
	reasoning, silent bool
}

// The tags a reasoning model's thinking is written between.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// think puts the reasoning model's thinking and its closing tag in front
// of steps made for the remaining limit.
func think(limit int, rest func(limit int) []step) []step {
	var steps []step
	for i, w := range words(FakeReasoning) {
		st := step{text: w, reasoning: true}
		if i+1 == limit {
			st.finish = openai.FinishLength
			return append(steps, st)
		}
		steps = append(steps, st)
	}
	if len(steps)+1 == limit {
		return append(steps, step{silent: true, finish: openai.FinishLength})
	}
	steps = append(steps, step{silent: true})
	return append(steps, rest(limit-len(steps))...)
}

// toolCall is the one tool call the echo model makes for "/tool NAME ARGS".
type toolCall struct {
	id, name, args string
	fragments      []string // args split as the stream sends them
	mode           string   // tool_choice: "auto", "required" or "named"
}

// handleChat is POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, body []byte) {
	if !checkJSONRequest(w, r) {
		return
	}
	var req chatRequest
	if !decode(w, body, &req) {
		return
	}
	if req.Messages == nil {
		writeValidation(w, missing("messages", body))
		return
	}
	var stops []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stops = []string{one}
		} else if json.Unmarshal(req.Stop, &stops) != nil {
			writeValidation(w, validationError{typ: "string_type", loc: "body.stop.str", msg: "Input should be a valid string", input: fieldInput(body, "stop")},
				validationError{typ: "list_type", loc: "body.stop.list[str]", msg: "Input should be a valid list", input: fieldInput(body, "stop")})
			return
		}
	}
	stream := boolOr(req.Stream, false)
	var streamOptions map[string]any
	_ = json.Unmarshal(req.StreamOptions, &streamOptions)
	if len(streamOptions) > 0 && !stream {
		// vLLM tests `data.get("stream_options")`: an empty object passes.
		e := valueError("Stream options can only be defined when `stream=True`.", body)
		e.param, e.ctx = "stream_options", "{'error': VLLMValidationError('Stream options can only be defined when `stream=True`.')}"
		writeValidation(w, e)
		return
	}
	toolChoice, named, verr := parseToolChoice(req.ToolChoice, req.Tools, body)
	if verr != nil {
		writeValidation(w, *verr)
		return
	}
	effort, verr := reasoningEffort(req.ReasoningEffort, body)
	if verr != nil {
		writeValidation(w, *verr)
		return
	}
	m, ok := s.model(req.Model, false)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", deref(req.Model)), "model")
		return
	}
	if m.Embedding {
		// That model's own server has no chat route.
		writeJSON(w, http.StatusNotFound, obj{{"detail", "Not Found"}})
		return
	}

	kwargs := CompletionKwargs(req.ChatTemplateKwargs, effort)
	prompt := Template(req.Messages, req.Tools, boolOr(req.AddGenerationPrompt, true), kwargs)
	thinks := m.Reasoning && thinking(kwargs) // a reasoning model, thinking on
	ids, _ := promptTokens(prompt, boolOr(req.AddSpecialTokens, false))
	nPrompt := len(ids)
	maxLen := m.maxLen()
	maxTokens, maxParam := req.MaxTokens, "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxTokens, maxParam = req.MaxCompletionTokens, "max_completion_tokens"
	}
	if nPrompt >= maxLen {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", maxLen, nPrompt), "input_tokens")
		return
	}
	if maxTokens != nil && nPrompt+*maxTokens > maxLen {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", *maxTokens, maxLen, nPrompt, *maxTokens, maxLen, nPrompt), "max_tokens")
		return
	}
	if maxTokens != nil && *maxTokens < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be at least 1, got %d.", maxParam, *maxTokens), maxParam)
		return
	}
	limit := maxLen - nPrompt
	if maxTokens != nil {
		limit = *maxTokens
	}

	role := openai.RoleAssistant
	if !boolOr(req.AddGenerationPrompt, true) {
		var last message
		_ = json.Unmarshal(req.Messages[len(req.Messages)-1], &last)
		role = last.Role
	}
	lastUser := lastUserText(req.Messages)

	var call *toolCall
	if toolChoice != "none" {
		call = parseToolCall(lastUser, req.Tools, toolChoice, named)
	}
	var steps []step
	if call != nil {
		steps = make([]step, 0, len(call.fragments)+2)
		if call.mode != "named" {
			steps = append(steps, step{}) // the name
		}
		for _, f := range call.fragments {
			steps = append(steps, step{text: f})
		}
		finish := openai.FinishToolCalls
		if call.mode == "named" {
			finish = openai.FinishStop // vLLM: a named tool call finishes with "stop"
		}
		steps = append(steps, step{finish: finish}) // EOS
	} else {
		reply := lastUser
		if req.ResponseFormat != nil && (req.ResponseFormat.Type == "json_object" || req.ResponseFormat.Type == "json_schema") {
			reply = string(mustMarshal(obj{{"text", lastUser}}))
		}
		gen := func(limit int) []step { return generate(reply, stops, limit) }
		if thinks {
			steps = think(limit, gen)
		} else {
			steps = gen(limit)
		}
	}

	id := "chatcmpl-" + requestID(r)
	created := time.Now().Unix()
	if stream {
		includeUsage, continuous := false, false
		var so *struct {
			IncludeUsage         *bool `json:"include_usage"`
			ContinuousUsageStats *bool `json:"continuous_usage_stats"`
		}
		if json.Unmarshal(req.StreamOptions, &so) == nil && so != nil {
			includeUsage = boolOr(so.IncludeUsage, true)
			continuous = includeUsage && boolOr(so.ContinuousUsageStats, false)
		}
		s.mu.Lock()
		breakAfter := s.breakAfter
		s.breakAfter = -1
		oldReasoning := s.oldReasoning
		s.mu.Unlock()
		s.streamChat(w, streamArgs{
			id: id, created: created, model: m.ID, role: role, steps: steps, call: call,
			nPrompt: nPrompt, includeUsage: includeUsage, continuous: continuous, breakAfter: breakAfter, oldReasoning: oldReasoning,
		})
		return
	}

	var content, reasoning strings.Builder
	for _, st := range steps {
		switch {
		case st.reasoning:
			reasoning.WriteString(st.text)
		case !st.silent:
			content.WriteString(st.text)
		}
	}
	var reasoningField any // null without a reasoning parser, thinking, or a tool call
	if thinks && call == nil {
		reasoningField = reasoning.String()
	}
	last := steps[len(steps)-1]
	msg := obj{{"role", role}}
	toolCalls := []any{}
	if call != nil {
		if call.mode == "auto" {
			msg = append(msg, kv{"content", nil}) // the tool parser found no text
		} else {
			msg = append(msg, kv{"content", ""})
		}
		toolCalls = append(toolCalls, obj{
			{"id", call.id},
			{"type", openai.ToolTypeFunction},
			{"function", obj{{"name", call.name}, {"arguments", call.args}}},
		})
	} else {
		msg = append(msg, kv{"content", content.String()})
	}
	msg = append(msg,
		kv{"refusal", nil}, kv{"annotations", nil}, kv{"audio", nil}, kv{"function_call", nil},
		kv{"tool_calls", toolCalls}, kv{"reasoning", reasoningField})
	nCompletion := len(steps)
	writeJSON(w, http.StatusOK, obj{
		{"id", id},
		{"object", openai.ObjectChatCompletion},
		{"created", created},
		{"model", m.ID},
		{"choices", []any{obj{
			{"index", 0},
			{"message", msg},
			{"logprobs", nil},
			{"finish_reason", last.finish},
			{"stop_reason", last.stopReason},
			{"token_ids", nil},
		}}},
		{"service_tier", nil},
		{"system_fingerprint", nil},
		{"usage", obj{
			{"prompt_tokens", nPrompt},
			{"total_tokens", nPrompt + nCompletion},
			{"completion_tokens", nCompletion},
			{"prompt_tokens_details", nil},
		}},
		{"prompt_logprobs", nil},
		{"prompt_token_ids", nil},
		{"kv_transfer_params", nil},
	})
}

type streamArgs struct {
	id           string
	created      int64
	model, role  string
	steps        []step
	call         *toolCall
	nPrompt      int
	includeUsage bool
	continuous   bool
	breakAfter   int
	oldReasoning bool
}

// streamChat writes the SSE stream as vLLM's chat_completion_stream_generator
// does: a role chunk, one chunk per generated token (the last one carrying
// finish_reason and stop_reason, and for a natural end it is the EOS
// token's, with empty content), an optional usage chunk, then [DONE].
func (s *Server) streamChat(w http.ResponseWriter, a streamArgs) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var frame []byte
	send := func(data string) {
		frame = openai.AppendEvent(frame[:0], data)
		_, _ = w.Write(frame)
		if flusher != nil {
			flusher.Flush()
		}
	}
	head := func(choices []any) obj {
		return obj{{"id", a.id}, {"object", openai.ObjectChatCompletionChunk}, {"created", a.created}, {"model", a.model}, {"choices", choices}}
	}
	usage := func(completion int) obj {
		return obj{{"prompt_tokens", a.nPrompt}, {"total_tokens", a.nPrompt + completion}, {"completion_tokens", completion}}
	}

	first := head([]any{obj{
		{"index", 0},
		{"delta", delta(obj{{"role", a.role}, {"content", ""}})},
		{"logprobs", nil},
		{"finish_reason", nil},
	}})
	if a.continuous {
		first = append(first, kv{"usage", usage(0)})
	}
	first = append(first, kv{"prompt_token_ids", nil})
	send(string(mustMarshal(first)))

	for i, st := range a.steps {
		if a.breakAfter >= 0 && i == a.breakAfter {
			send(pyDumps(obj{{"error", obj{
				{"message", "Internal server error"},
				{"type", "InternalServerError"},
				{"param", nil},
				{"code", http.StatusInternalServerError},
			}}}))
			send(openai.Done)
			return
		}
		var d obj
		switch {
		case a.call != nil && i == 0:
			fn := obj{{"name", a.call.name}}
			switch a.call.mode {
			case "required":
				fn = append(fn, kv{"arguments", ""})
			case "named":
				fn = append(fn, kv{"arguments", st.text})
			}
			d = delta(obj{{"tool_calls", []any{obj{
				{"id", a.call.id},
				{"type", openai.ToolTypeFunction},
				{"index", 0},
				{"function", fn},
			}}}})
		case a.call != nil && (st.finish == "" || a.call.mode == "named"):
			d = delta(obj{{"tool_calls", []any{obj{
				{"index", 0},
				{"function", obj{{"arguments", st.text}}},
			}}}})
		case a.call != nil:
			d = delta(obj{}) // the parser had nothing to say for EOS
		case st.silent && st.finish == "":
			continue // the parser returned nothing: vLLM sends no chunk
		case st.silent:
			d = delta(obj{})
		case st.reasoning && a.oldReasoning:
			d = obj{{"reasoning_content", st.text}}
		case st.reasoning:
			d = delta(obj{{"reasoning", st.text}})
		default:
			d = delta(obj{{"content", st.text}})
		}
		choice := obj{{"index", 0}, {"delta", d}, {"logprobs", nil}}
		if st.finish == "" {
			choice = append(choice, kv{"finish_reason", nil}, kv{"token_ids", nil})
		} else {
			choice = append(choice, kv{"finish_reason", st.finish}, kv{"stop_reason", st.stopReason}, kv{"token_ids", nil})
		}
		chunk := head([]any{choice})
		if a.continuous {
			chunk = append(chunk, kv{"usage", usage(i + 1)})
		}
		send(string(mustMarshal(chunk)))
	}
	if a.includeUsage {
		send(string(mustMarshal(append(head([]any{}), kv{"usage", usage(len(a.steps))}))))
	}
	send(openai.Done)
}

// delta adds to a streamed delta's set fields the ones vLLM's DeltaMessage
// always carries, in the model's field order (role, content, reasoning,
// reasoning_content, tool_calls).
func delta(set obj) obj {
	var out obj
	for _, f := range set {
		if f.k == "role" || f.k == "content" {
			out = append(out, f)
		}
	}
	var reasoning any
	for _, f := range set {
		if f.k == "reasoning" {
			out = append(out, f)
			reasoning = f.v
		}
	}
	// vLLM's DeltaMessage copies `reasoning` into the deprecated
	// `reasoning_content` in a pydantic after-validator; the assignment
	// marks the field as set, so every streamed delta, serialised with
	// exclude_unset, carries it (null when there is no reasoning).
	out = append(out, kv{"reasoning_content", reasoning})
	for _, f := range set {
		if f.k == "tool_calls" {
			out = append(out, f)
		}
	}
	if out == nil {
		out = obj{}
	}
	return out
}

// generate runs the echo model over reply: one token per word with its
// trailing whitespace, cut by a stop string (finish "stop", stop_reason the
// string, the string itself not sent) or after limit tokens (finish
// "length"); otherwise an EOS token ends it (empty text, finish "stop",
// stop_reason null) and counts as a completion token, as in vLLM.
func generate(reply string, stops []string, limit int) []step {
	pieces := words(reply)
	var steps []step
	sent := 0 // bytes of reply already sent
	for i, p := range pieces {
		end := sent + len(p)
		text := reply[:end]
		if at, stop := firstStop(text, stops); stop != "" {
			if at < sent {
				at = sent
			}
			return append(steps, step{text: reply[sent:at], finish: openai.FinishStop, stopReason: stop})
		}
		st := step{text: p}
		if i+1 == limit {
			st.finish = openai.FinishLength
			return append(steps, st)
		}
		steps = append(steps, st)
		sent = end
	}
	return append(steps, step{finish: openai.FinishStop})
}

func firstStop(text string, stops []string) (int, string) {
	best, which := -1, ""
	for _, s := range stops {
		if s == "" {
			continue
		}
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best, which = i, s
		}
	}
	return best, which
}

// words splits text into runs of non-space followed by their trailing
// whitespace; leading whitespace goes with the first run.
func words(text string) []string {
	var out []string
	start, inSpace := 0, false
	for i, r := range text {
		if unicode.IsSpace(r) {
			inSpace = true
			continue
		}
		if inSpace && strings.TrimSpace(text[start:i]) != "" {
			out = append(out, text[start:i])
			start = i
		}
		inSpace = false
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func lastUserText(messages []json.RawMessage) string {
	for i := len(messages) - 1; i >= 0; i-- {
		var m message
		if json.Unmarshal(messages[i], &m) == nil && m.Role == openai.RoleUser {
			return m.text()
		}
	}
	return ""
}

// parseToolChoice reads tool_choice as vLLM's check_tool_usage does: absent
// with tools means "auto"; "required" with an empty tool list means "none";
// a named choice must name an offered tool.
func parseToolChoice(raw json.RawMessage, tools []json.RawMessage, body []byte) (string, string, *validationError) {
	if len(raw) == 0 || string(raw) == "null" {
		if len(tools) > 0 {
			return "auto", "", nil
		}
		return "none", "", nil
	}
	var choice string
	if json.Unmarshal(raw, &choice) == nil && choice == "none" {
		return "none", "", nil
	}
	if tools == nil {
		e := valueError("When using `tool_choice`, `tools` must be set.", body)
		return "", "", &e
	}
	var named struct {
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case choice == "auto":
		return "auto", "", nil
	case choice == "required" && len(tools) == 0:
		return "none", "", nil
	case choice == "required":
		return "required", "", nil
	case choice != "":
		e := valueError(fmt.Sprintf(`Invalid value for `+"`tool_choice`"+`: %s! Only named tools, "none", "auto" or "required" are supported.`, choice), body)
		return "", "", &e
	case json.Unmarshal(raw, &named) != nil || named.Function == nil || named.Function.Name == "":
		e := valueError("Invalid value for `function` in `tool_choice`! Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`", body)
		return "", "", &e
	}
	if toolName(tools, named.Function.Name) {
		return "named", named.Function.Name, nil
	}
	e := valueError("The tool specified in `tool_choice` does not match any of the specified `tools`", body)
	return "", "", &e
}

func toolName(tools []json.RawMessage, name string) bool {
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Function.Name == name {
			return true
		}
	}
	return false
}

// parseToolCall decides the echo model's tool call. With tool_choice "auto"
// it calls NAME when the last user message is "/tool NAME ARGS", NAME is
// offered and ARGS is JSON; the arguments come back as vLLM's tool parsers
// return them, re-serialised by Python's json.dumps (so does "required",
// which vLLM decodes as a guided JSON list). "required" without such a
// message calls the first tool with {}. A named tool_choice always calls
// that tool; its arguments are the raw text the model was guided to write
// (ARGS when the message names the same tool, else {}).
func parseToolCall(text string, tools []json.RawMessage, mode, forced string) *toolCall {
	name, args := "", ""
	if rest, ok := strings.CutPrefix(text, "/tool "); ok {
		name, args, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		if !toolName(tools, name) || !json.Valid([]byte(args)) {
			name, args = "", ""
		}
	}
	switch mode {
	case "named":
		if name != forced {
			args = "{}"
		}
		return &toolCall{id: "chatcmpl-tool-" + randomHex(), name: forced, args: args, fragments: words(args), mode: mode}
	case "required":
		if name == "" {
			var t struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			_ = json.Unmarshal(tools[0], &t)
			name, args = t.Function.Name, "{}"
		}
	}
	if name == "" {
		return nil
	}
	py, err := pyArgs([]byte(args))
	if err != nil {
		return nil
	}
	return &toolCall{id: "chatcmpl-tool-" + randomHex(), name: name, args: py, fragments: words(py), mode: mode}
}

// requestID is the base of a response id: the X-Request-Id header when
// the client sends one (vLLM uses it), else 32 random hex digits.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return id
	}
	return randomHex()
}

func deref(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}
