package edge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// keyOther is a key of another tenant.
const keyOther = "tgk_test_other"

// responsesStack is the stack with a key of a second tenant.
func responsesStack(t *testing.T, sc stackConfig) *stack {
	auth := testAuth()
	auth[keyOther] = keys.NewPrincipal("ten_other", "key_other", "key_other", true, nil, 0, 0, nil, time.Time{})
	sc.auth, sc.local = auth, len(sc.interceptors) == 0 // interceptors need the gRPC transport
	return newStack(t, sc)
}

// own is the request id's own part, which the response's ids share.
func own(t *testing.T, r response) string {
	t.Helper()
	id, ok := strings.CutPrefix(r.id(), "req_")
	if !ok {
		t.Fatalf("x-request-id %q", r.id())
	}
	return id
}

// responseJSON is the exact response object of a builtin/echo reply.
func responseJSON(id, status, incomplete, instructions, output, usage, tools, previous string) string {
	return `{"id":"resp_` + id + `","object":"response","created_at":1767225600,"status":"` + status + `","error":null,` +
		`"incomplete_details":` + incomplete + `,"instructions":` + instructions + `,"max_output_tokens":null,"model":"builtin/echo",` +
		`"output":` + output + `,"parallel_tool_calls":true,"previous_response_id":` + previous + `,` +
		`"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1,"text":{"format":{"type":"text"}},` +
		`"tool_choice":"auto","tools":` + tools + `,"top_p":1,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
}

func message(id, status, text string) string {
	return `{"id":"msg_` + id + `","type":"message","status":"` + status + `","content":[` + outputText(text) + `],"role":"assistant"}`
}

func outputText(text string) string {
	return `{"type":"output_text","annotations":[],"logprobs":[],"text":"` + text + `"}`
}

func usageJSON(in, out string) string {
	return `{"input_tokens":` + in + `,"input_tokens_details":{"cached_tokens":0},"output_tokens":` + out +
		`,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":` + sum(in, out) + `}`
}

func sum(a, b string) string {
	var x, y int
	_ = json.Unmarshal([]byte(a), &x)
	_ = json.Unmarshal([]byte(b), &y)
	out, _ := json.Marshal(x + y)
	return string(out)
}

func TestResponsesPlain(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hello big world","instructions":"be brief"}`)
	id := own(t, r)
	want := responseJSON(id, "completed", "null", `"be brief"`, `[`+message(id, "completed", "hello big world")+`]`,
		usageJSON("5", "3"), "[]", "null")
	if got := string(wantOK(t, r)); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

// The stream is named events in OpenAI's order, each frame exactly.
func TestResponsesStreamFraming(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":[{"role":"user","content":[{"type":"input_text","text":"hello big world"}]}],"stream":true}`)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	id := own(t, r)
	msgID := "msg_" + id
	inProgress := responseJSON(id, "in_progress", "null", "null", "[]", "null", "[]", "null")
	done := responseJSON(id, "completed", "null", "null", `[`+message(id, "completed", "hello big world")+`]`, usageJSON("3", "3"), "[]", "null")
	delta := func(text, seq string) string {
		return `{"type":"response.output_text.delta","content_index":0,"delta":"` + text + `","item_id":"` + msgID +
			`","logprobs":[],"output_index":0,"sequence_number":` + seq + `}`
	}
	want := []string{
		"event: response.created\ndata: " + `{"type":"response.created","response":` + inProgress + `,"sequence_number":0}`,
		"event: response.in_progress\ndata: " + `{"type":"response.in_progress","response":` + inProgress + `,"sequence_number":1}`,
		"event: response.output_item.added\ndata: " + `{"type":"response.output_item.added","item":{"id":"` + msgID +
			`","type":"message","status":"in_progress","content":[],"role":"assistant"},"output_index":0,"sequence_number":2}`,
		"event: response.content_part.added\ndata: " + `{"type":"response.content_part.added","content_index":0,"item_id":"` + msgID +
			`","output_index":0,"part":` + outputText("") + `,"sequence_number":3}`,
		"event: response.output_text.delta\ndata: " + delta("hello ", "4"),
		"event: response.output_text.delta\ndata: " + delta("big ", "5"),
		"event: response.output_text.delta\ndata: " + delta("world", "6"),
		"event: response.output_text.done\ndata: " + `{"type":"response.output_text.done","content_index":0,"item_id":"` + msgID +
			`","logprobs":[],"output_index":0,"sequence_number":7,"text":"hello big world"}`,
		"event: response.content_part.done\ndata: " + `{"type":"response.content_part.done","content_index":0,"item_id":"` + msgID +
			`","output_index":0,"part":` + outputText("hello big world") + `,"sequence_number":8}`,
		"event: response.output_item.done\ndata: " + `{"type":"response.output_item.done","item":` + message(id, "completed", "hello big world") +
			`,"output_index":0,"sequence_number":9}`,
		"event: response.completed\ndata: " + `{"type":"response.completed","response":` + done + `,"sequence_number":10}`,
	}
	frames := namedFrames(t, r.body)
	if len(frames) != len(want) {
		t.Fatalf("%d frames, want %d:\n%s", len(frames), len(want), r.body)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d\n got %s\nwant %s", i, frames[i], want[i])
		}
	}
	// What is stored is the completed response.
	g := s.do(t, http.MethodGet, "/v1/responses/resp_"+id, keyAll, "")
	if got := string(wantOK(t, g)); got != done {
		t.Errorf("stored\n got %s\nwant %s", got, done)
	}
}

// namedFrames splits a stream on blank lines, failing unless every event
// is one event: line and one data: line.
func namedFrames(t *testing.T, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	frames := strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n")
	for i, f := range frames {
		lines := strings.Split(f, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Errorf("frame %d is not an event line and a data line: %q", i, f)
		}
	}
	return frames
}

const responseWeatherTool = `[{"type":"function","name":"get_weather","description":"the weather","parameters":{"type":"object"},"strict":true}]`

// A function tool round trip: the call is a function_call item, its
// output goes back with previous_response_id, and the engine sees the
// whole conversation.
func TestResponsesToolRoundTrip(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyTool, `{"model":"builtin/echo","input":"/tool get_weather {\"city\":\"Paris\"}","tools":`+responseWeatherTool+`}`)
	id := own(t, r)
	var resp struct {
		Status string `json:"status"`
		Output []struct {
			Type, ID, CallID, Name, Arguments, Status string
		} `json:"output"`
	}
	if err := json.Unmarshal(wantOK(t, r), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" || resp.Output[0].ID != "fc_"+id+"_0" ||
		resp.Output[0].Name != "get_weather" || resp.Output[0].Arguments != `{"city":"Paris"}` || resp.Output[0].Status != "completed" {
		t.Fatalf("output %s", r.body)
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(r.body, &raw)
	var out []map[string]any
	_ = json.Unmarshal(raw["output"], &out)
	callID, _ := out[0]["call_id"].(string)
	if callID == "" {
		t.Fatalf("no call_id: %s", r.body)
	}
	if string(raw["tools"]) != responseWeatherTool {
		t.Errorf("tools echoed %s", raw["tools"])
	}

	next := s.post(t, "/v1/responses", keyTool, `{"model":"builtin/echo","previous_response_id":"resp_`+id+`","tools":`+responseWeatherTool+`,`+
		`"input":[{"type":"function_call_output","call_id":"`+callID+`","output":"sunny"}]}`)
	nid := own(t, next)
	want := responseJSON(nid, "completed", "null", "null", `[`+message(nid, "completed", "tool result: sunny")+`]`,
		usageJSON("4", "3"), responseWeatherTool, `"resp_`+id+`"`)
	if got := string(wantOK(t, next)); got != want {
		t.Errorf("continuation\n got %s\nwant %s", got, want)
	}

	// The conversation sent whole, the call as an item_reference to the
	// stored item (as the Vercel AI SDK sends it); another tenant's
	// reference is not found.
	input := `[{"role":"user","content":"/tool get_weather {}"},{"type":"item_reference","id":"fc_` + id + `_0"},` +
		`{"type":"function_call_output","call_id":"` + callID + `","output":"rainy"}]`
	whole := s.post(t, "/v1/responses", keyTool, `{"model":"builtin/echo","tools":`+responseWeatherTool+`,"input":`+input+`}`)
	if m := decodeMap(t, wantOK(t, whole)); !strings.Contains(string(whole.body), `"text":"tool result: rainy"`) {
		t.Errorf("item_reference: %v", m)
	}
	wantError(t, s.post(t, "/v1/responses", keyOther, `{"model":"builtin/echo","input":`+input+`}`),
		http.StatusNotFound, "not_found", "invalid_request_error", "input[1].id")
}

// A streamed tool call is a function_call item with its arguments' events.
func TestResponsesStreamToolCall(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyTool, `{"model":"builtin/echo","input":"/tool get_weather {\"city\":\"Paris\"}","tools":`+responseWeatherTool+`,"stream":true}`)
	var names []string
	var args string
	for _, f := range namedFrames(t, r.body) {
		name, data, _ := strings.Cut(f, "\ndata: ")
		names = append(names, strings.TrimPrefix(name, "event: "))
		var ev struct{ Type, Delta, Arguments string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != strings.TrimPrefix(name, "event: ") {
			t.Errorf("event %s has type %s", name, ev.Type)
		}
		if ev.Type == "response.function_call_arguments.delta" {
			args += ev.Delta
		}
		if ev.Type == "response.function_call_arguments.done" && ev.Arguments != `{"city":"Paris"}` {
			t.Errorf("arguments done %q", ev.Arguments)
		}
	}
	if args != `{"city":"Paris"}` {
		t.Errorf("argument deltas make %q", args)
	}
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
		"response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
}

// max_output_tokens is the reservation and the engine's bound; a reply
// cut by it is incomplete.
func TestResponsesIncomplete(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hello big world","max_output_tokens":1}`)
	m := decodeMap(t, wantOK(t, r))
	if m["status"] != "incomplete" || m["max_output_tokens"] != json.Number("1") {
		t.Errorf("status %v, max_output_tokens %v", m["status"], m["max_output_tokens"])
	}
	if d, _ := m["incomplete_details"].(map[string]any); d["reason"] != "max_output_tokens" {
		t.Errorf("incomplete_details %v", m["incomplete_details"])
	}
	r = s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hello big world","max_output_tokens":1,"stream":true}`)
	frames := namedFrames(t, r.body)
	if last := frames[len(frames)-1]; !strings.HasPrefix(last, "event: response.incomplete\n") ||
		!strings.Contains(last, `"incomplete_details":{"reason":"max_output_tokens"}`) {
		t.Errorf("last frame %s", last)
	}
}

// Stored responses are the tenant's: another tenant's id is 404, as is a
// deleted one, and a previous_response_id of another tenant.
func TestResponsesStoredPerTenant(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"secret"}`)
	body := wantOK(t, r)
	rid := "resp_" + own(t, r)
	if got := wantOK(t, s.do(t, http.MethodGet, "/v1/responses/"+rid, keyEcho, "")); string(got) != string(body) {
		t.Errorf("GET\n got %s\nwant %s", got, body)
	}
	wantError(t, s.do(t, http.MethodGet, "/v1/responses/"+rid, keyOther, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")
	wantError(t, s.do(t, http.MethodDelete, "/v1/responses/"+rid, keyOther, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")
	wantError(t, s.post(t, "/v1/responses", keyOther, `{"model":"builtin/echo","input":"x","previous_response_id":"`+rid+`"}`),
		http.StatusNotFound, "not_found", "invalid_request_error", "previous_response_id")
	del := s.do(t, http.MethodDelete, "/v1/responses/"+rid, keyAll, "")
	if got := string(wantOK(t, del)); got != `{"id":"`+rid+`","object":"response.deleted","deleted":true}` {
		t.Errorf("DELETE %s", got)
	}
	wantError(t, s.do(t, http.MethodGet, "/v1/responses/"+rid, keyAll, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")

	// store false keeps nothing.
	r = s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"x","store":false}`)
	if m := decodeMap(t, wantOK(t, r)); m["store"] != false {
		t.Errorf("store %v", m["store"])
	}
	wantError(t, s.do(t, http.MethodGet, "/v1/responses/resp_"+own(t, r), keyAll, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")

	r = s.do(t, http.MethodPut, "/v1/responses/"+rid, keyAll, "")
	wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error", "")
	if a := r.header.Get("Allow"); a != "DELETE, GET" {
		t.Errorf("Allow %q", a)
	}
}

// A Responses request is governed as chat: the key's tool: scopes and
// models, and the audit event names /v1/responses.
func TestResponsesGovernedAndAudited(t *testing.T) {
	audit := newAuditRecorder()
	s := responsesStack(t, stackConfig{audit: audit})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"/tool get_weather {}","tools":`+responseWeatherTool+`}`)
	wantError(t, r, http.StatusForbidden, "policy_denied", "policy", "")
	if ev := audit.next(t); ev.Endpoint != "/v1/responses" || ev.Status != http.StatusForbidden || ev.RequestID != r.id() {
		t.Errorf("denied event %+v", ev)
	}
	r = s.post(t, "/v1/responses", keyEmbed, `{"model":"builtin/echo","input":"hi"}`)
	if r.status != http.StatusForbidden && r.status != http.StatusNotFound {
		t.Errorf("a model outside the key's: status %d", r.status)
	}
	audit.next(t)
	r = s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hi there"}`)
	body := wantOK(t, r)
	ev := audit.next(t)
	if ev.Endpoint != "/v1/responses" || ev.Status != http.StatusOK || ev.Model != "builtin/echo" ||
		ev.PromptTokens != 2 || ev.CompletionTokens != 2 || string(ev.ResponseBody) != string(body) {
		t.Errorf("event %+v", ev)
	}
	s.do(t, http.MethodGet, "/v1/responses/resp_"+own(t, r), keyAll, "")
	if ev := audit.next(t); ev.Endpoint != "/v1/responses" || ev.Status != http.StatusOK {
		t.Errorf("GET event %+v", ev)
	}
}

func TestResponsesInvalid(t *testing.T) {
	s := responsesStack(t, stackConfig{})
	for _, c := range []struct{ body, param string }{
		{`{"model":"builtin/echo"}`, "input"},
		{`{"input":"x"}`, "model"},
		{`{"model":"builtin/echo","input":[]}`, "input"},
		{`{"model":"builtin/echo","input":[{"role":"robot","content":"x"}]}`, "input[0].role"},
		{`{"model":"builtin/echo","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type"},
		{`{"model":"builtin/echo","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
		{`{"model":"builtin/echo","input":"x","max_output_tokens":0}`, "max_output_tokens"},
		{`{"model":"builtin/echo","input":"x","temperature":3}`, "temperature"},
		{`{"model":"builtin/echo","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"builtin/echo","input":"x","tool_choice":{"type":"function","name":"nope"}}`, "tool_choice"},
		{`{"model":"builtin/echo","input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type"},
		{`{"model":"builtin/echo","input":"x","reasoning":{"effort":"huge"}}`, "reasoning.effort"},
		{`{"model":"builtin/echo","input":"x","background":true}`, "background"},
		{`{"model":"builtin/echo","input":"x","previous_response_id":""}`, "previous_response_id"},
	} {
		wantError(t, s.post(t, "/v1/responses", keyAll, c.body), http.StatusBadRequest, "invalid_request", "invalid_request_error", c.param)
	}
}

// eventTypes lists a stream's event names, checking each against its
// payload's type and its sequence_number.
func eventTypes(t *testing.T, body []byte) ([]string, []map[string]any) {
	t.Helper()
	var names []string
	var payloads []map[string]any
	for i, f := range namedFrames(t, body) {
		name, data, _ := strings.Cut(f, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		m := decodeMap(t, []byte(data))
		if m["type"] != name || m["sequence_number"] != json.Number(fmt.Sprint(i)) {
			t.Errorf("frame %d: event %s, type %v, sequence_number %v", i, name, m["type"], m["sequence_number"])
		}
		names = append(names, name)
		payloads = append(payloads, m)
	}
	return names, payloads
}

// Text, a call, then text again: each run is its own item, closed when the
// next opens, with its own output_index; plain, the same items in order.
func TestResponsesItemsInReplyOrder(t *testing.T) {
	script := scriptedChat(
		&inferencev1.ChatCompletionResponse{Content: "let me see"},
		&inferencev1.ChatCompletionResponse{ToolCalls: []*inferencev1.ToolCallDelta{{Index: 0, Id: "call_1", Name: "get_weather", Arguments: "{}"}}},
		&inferencev1.ChatCompletionResponse{Content: "done"},
		&inferencev1.ChatCompletionResponse{FinishReason: inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS,
			Usage: &inferencev1.Usage{PromptTokens: 3, CompletionTokens: 4}})
	s := responsesStack(t, stackConfig{interceptors: []grpc.StreamServerInterceptor{script}})
	body := `{"model":"builtin/echo","input":"weather?","tools":` + responseWeatherTool + `%s}`
	r := s.post(t, "/v1/responses", keyTool, fmt.Sprintf(body, `,"stream":true`))
	names, payloads := eventTypes(t, r.body)
	want := "response.created response.in_progress " +
		"response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	id := own(t, r)
	final, _ := payloads[len(payloads)-1]["response"].(map[string]any)
	out, _ := json.Marshal(final["output"])
	wantOut := `[` + message(id, "completed", "let me see") + `,{"arguments":"{}","call_id":"call_1","id":"fc_` + id +
		`_0","name":"get_weather","status":"completed","type":"function_call"},` +
		strings.Replace(message(id, "completed", "done"), `"msg_`+id+`"`, `"msg_`+id+`_1"`, 1) + `]`
	// Compared as decoded JSON: the map re-encoding sorts the keys.
	var a, b any
	_ = json.Unmarshal(out, &a)
	_ = json.Unmarshal([]byte(wantOut), &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("output\n got %s\nwant %s", out, wantOut)
	}
	for i, p := range payloads {
		if p["type"] == "response.output_item.added" {
			if idx := p["output_index"]; idx != json.Number(fmt.Sprint(map[int]int{2: 0, 8: 1, 12: 2}[i])) {
				t.Errorf("event %d: output_index %v", i, idx)
			}
		}
	}

	plain := decodeMap(t, wantOK(t, s.post(t, "/v1/responses", keyTool, fmt.Sprintf(body, ""))))
	items, _ := plain["output"].([]any)
	if len(items) != 2 {
		t.Fatalf("plain output %v", plain["output"])
	}
	// Plain, the text is one message (as chat joins it), then the call.
	if m, _ := items[0].(map[string]any); m["type"] != "message" || !strings.Contains(fmt.Sprint(m["content"]), "let me seedone") {
		t.Errorf("plain message %v", m)
	}
}

// An engine failing after the 200 ends the stream with response.failed,
// recorded first.
func TestResponsesStreamFailed(t *testing.T) {
	audit := newAuditRecorder()
	s := responsesStack(t, stackConfig{audit: audit,
		interceptors: []grpc.StreamServerInterceptor{abortAfter(1, status.Error(codes.Internal, "engine exploded"))}})
	r := s.post(t, "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hello big world","stream":true}`)
	names, payloads := eventTypes(t, r.body)
	if last := names[len(names)-1]; last != "response.failed" {
		t.Fatalf("events %v", names)
	}
	resp, _ := payloads[len(payloads)-1]["response"].(map[string]any)
	e, _ := resp["error"].(map[string]any)
	if resp["status"] != "failed" || e["code"] != "internal_error" {
		t.Errorf("failed response %v", resp)
	}
	if ev := audit.next(t); ev.Endpoint != "/v1/responses" || string(ev.ResponseBody) != string(r.body) {
		t.Errorf("event %+v\nbody %s", ev, r.body)
	}
	wantError(t, s.do(t, http.MethodGet, "/v1/responses/resp_"+own(t, r), keyAll, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")
}
