package edge

import (
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf8"

	"buf.build/go/protovalidate"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// The request decoders under arbitrary bodies. Beyond not panicking, each
// must be deterministic (the same body, the same request or the same
// refusal), refuse in the spec's envelope (a 400, or a 404 for an item
// that does not exist, with a message), and hand the engines only
// requests the inference API's own rules (protovalidate, which the
// in-process client applies) accept: a request the edge lets through and
// the service refuses would be a 500 instead of a 400 naming the field.
//
// Seeds: the bodies below, and testdata/fuzz/<target>/ for inputs worth
// keeping (a crash found, a corner case).

// fuzzRequestID is the id the edge gives a call (x-request-id).
const fuzzRequestID = "req_0123456789abcdefABCDEF"

var chatSeeds = []string{
	`{"model":"builtin/echo","messages":[{"role":"user","content":"Hello"}]}`,
	`{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
	`{"model":"vllm/llama","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}`,
	`{"model":"builtin/echo","messages":[{"role":"developer","content":"x"},{"role":"user","content":"y","name":"bob"}],"temperature":0.7,"top_p":0.9,"max_tokens":16,"max_completion_tokens":8,"stop":["\n","END"],"seed":42,` +
		`"frequency_penalty":0.5,"presence_penalty":-0.5,"logit_bias":{"50256":-100},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}},` +
		`"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"low","user":"u","n":1}`,
	`{"model":"builtin/echo","messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_object"},"stop":"x"}`,
	`{"model":"builtin/echo","messages":[{"role":"assistant","content":"a","reasoning_content":"r"}]}`,
	`{"model":"builtin/echo","messages":[{"role":"user","content":"a"}],"functions":[{"name":"f"}]}`,
	`{"model":"builtin/echo","model":"other/m","messages":[]}`,
	`{"model":"Builtin/echo","messages":[{"role":"user","content":"\ud800"}]}`,
	`{"model":"builtin/echo","messages":[{"role":"user","content":"a"}],"temperature":1e400}`,
	`[]`, ``, `null`, `{"messages":[{"role":7}]}`,
}

var completionSeeds = []string{
	`{"model":"builtin/echo","prompt":"Say this is a test"}`,
	`{"model":"builtin/echo","prompt":["one","two"],"max_tokens":7,"temperature":0,"top_p":1,"stop":["\n"],"seed":1,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"builtin/echo","prompt":"x","suffix":"y"}`,
	`{"model":"builtin/echo","prompt":[[1,2,3]]}`,
	`{"model":"builtin/echo","prompt":"x","n":2,"best_of":1,"echo":false,"logprobs":null}`,
	`{"model":"builtin/echo","prompt":[]}`,
	`{"model":"builtin/echo","prompt":""}`,
}

var embeddingSeeds = []string{
	`{"model":"vllm/e5","input":"The food was delicious"}`,
	`{"model":"vllm/e5","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`,
	`{"model":"vllm/e5","input":[1,2,3]}`,
	`{"model":"vllm/e5","input":[[1,2],[3]],"encoding_format":"float"}`,
	`{"model":"vllm/e5","input":[-1]}`,
	`{"model":"vllm/e5","input":[]}`,
	`{"model":"vllm/e5","input":[[]],"dimensions":0}`,
	`{"model":"vllm/e5","input":["a",1]}`,
}

var responsesSeeds = []string{
	`{"model":"builtin/echo","input":"Tell me a story"}`,
	`{"model":"builtin/echo","instructions":"Be brief.","input":[{"role":"user","content":"Hi"}],"stream":true,"store":false,"temperature":0.2,"top_p":0.5,"max_output_tokens":64,"metadata":{"k":"v"},"reasoning":{"effort":"medium"}}`,
	`{"model":"builtin/echo","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"sunny"}],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":true}],"tool_choice":"auto","parallel_tool_calls":false}`,
	`{"model":"builtin/echo","input":[{"type":"item_reference","id":"msg_stored"},{"type":"item_reference","id":"fc_stored"},{"type":"function_call_output","call_id":"call_9","output":[{"type":"input_text","text":"ok"}]}]}`,
	`{"model":"builtin/echo","input":[{"type":"item_reference","id":"msg_missing"}]}`,
	`{"model":"builtin/echo","input":"x","previous_response_id":"resp_abc","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true}}}`,
	`{"model":"builtin/echo","input":[{"type":"reasoning","id":"rs_1"}]}`,
	`{"model":"builtin/echo","input":"x","background":true,"truncation":"auto","conversation":"c"}`,
}

// fuzzResolver holds two stored items: an assistant's message and a
// function call, as a stored response's output.
func fuzzResolver(id string) *openai.ResponseInputItem {
	switch id {
	case "msg_stored":
		return &openai.ResponseInputItem{Type: ptr(openai.ItemMessage), Role: ptr(openai.RoleAssistant),
			ID: id, Status: "completed", Content: []byte(`[{"type":"output_text","text":"Earlier answer"}]`)}
	case "fc_stored":
		return &openai.ResponseInputItem{Type: ptr("function_call"), ID: id, CallID: "call_9",
			Name: "get_weather", Arguments: ptr(`{"city":"Paris"}`), Status: "completed"}
	}
	return nil
}

func ptr(s string) *string { return &s }

func newValidator(f *testing.F) protovalidate.Validator {
	v, err := protovalidate.New()
	if err != nil {
		f.Fatal(err)
	}
	return v
}

// checkRefusal: e is a refusal in the spec's envelope.
func checkRefusal(t *testing.T, e *apiError) {
	t.Helper()
	if e.Status != http.StatusBadRequest && (e.Status != http.StatusNotFound || e.Code != codeNotFound) {
		t.Fatalf("refused with status %d: %+v", e.Status, e)
	}
	if e.Status == http.StatusBadRequest && e.Code != codeInvalidRequest {
		t.Fatalf("400 with code %q: %+v", e.Code, e)
	}
	if e.Type != typeInvalidRequest || e.Message == "" {
		t.Fatalf("refusal without its type or message: %+v", e)
	}
	if !utf8.ValidString(e.Message) || !utf8.ValidString(e.Param) {
		t.Fatalf("refusal of invalid UTF-8: %q (param %q)", e.Message, e.Param)
	}
	raw, err := json.Marshal(e.envelope())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &back); err != nil || back.Error == nil || back.Error.Message == "" || back.Error.Code != e.Code {
		t.Fatalf("envelope %s: %v", raw, err)
	}
}

// sameRefusal: the two decodings of one body refused it alike.
func sameRefusal(t *testing.T, a, b *apiError) {
	t.Helper()
	if *a != *b {
		t.Fatalf("one body, two refusals: %+v and %+v", a, b)
	}
}

func validRequest(t *testing.T, v protovalidate.Validator, m proto.Message) {
	t.Helper()
	if err := v.Validate(m); err != nil {
		t.Fatalf("accepted a request the inference API refuses: %v\n%v", err, m)
	}
}

func FuzzDecodeChat(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s))
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		call, e := decodeChat(body, fuzzRequestID)
		again, e2 := decodeChat(body, fuzzRequestID)
		if (e == nil) != (e2 == nil) {
			t.Fatalf("one body, accepted once and refused once: %v, %v", e, e2)
		}
		if e != nil {
			sameRefusal(t, e, e2)
			checkRefusal(t, e)
			return
		}
		if !proto.Equal(call.req, again.req) || call.stream != again.stream || call.includeUsage != again.includeUsage || call.oneToolCall != again.oneToolCall {
			t.Fatalf("one body, two requests:\n%v\n%v", call.req, again.req)
		}
		validRequest(t, v, call.req)
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range completionSeeds {
		f.Add([]byte(s))
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		call, e := decodeCompletion(body, fuzzRequestID)
		again, e2 := decodeCompletion(body, fuzzRequestID)
		if (e == nil) != (e2 == nil) {
			t.Fatalf("one body, accepted once and refused once: %v, %v", e, e2)
		}
		if e != nil {
			sameRefusal(t, e, e2)
			checkRefusal(t, e)
			return
		}
		if len(call.reqs) == 0 || len(call.reqs) != len(again.reqs) || call.stream != again.stream || call.includeUsage != again.includeUsage {
			t.Fatalf("one body, two calls: %d and %d requests", len(call.reqs), len(again.reqs))
		}
		for i, r := range call.reqs {
			if !proto.Equal(r, again.reqs[i]) {
				t.Fatalf("one body, two requests:\n%v\n%v", r, again.reqs[i])
			}
			validRequest(t, v, r)
		}
	})
}

func FuzzDecodeEmbeddings(f *testing.F) {
	for _, s := range embeddingSeeds {
		f.Add([]byte(s))
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, b64, e := decodeEmbeddings(body, fuzzRequestID)
		again, b64again, e2 := decodeEmbeddings(body, fuzzRequestID)
		if (e == nil) != (e2 == nil) {
			t.Fatalf("one body, accepted once and refused once: %v, %v", e, e2)
		}
		if e != nil {
			sameRefusal(t, e, e2)
			checkRefusal(t, e)
			return
		}
		if !proto.Equal(req, again) || b64 != b64again {
			t.Fatalf("one body, two requests:\n%v\n%v", req, again)
		}
		validRequest(t, v, req)
	})
}

func FuzzDecodeResponses(f *testing.F) {
	for _, s := range responsesSeeds {
		f.Add([]byte(s))
	}
	v := newValidator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		call, e := decodeResponses(body, fuzzRequestID, fuzzResolver)
		again, e2 := decodeResponses(body, fuzzRequestID, fuzzResolver)
		if (e == nil) != (e2 == nil) {
			t.Fatalf("one body, accepted once and refused once: %v, %v", e, e2)
		}
		if e != nil {
			sameRefusal(t, e, e2)
			checkRefusal(t, e)
			return
		}
		// The messages are set once the previous response is loaded;
		// without one, they are the instructions and the input.
		call.messages(nil)
		again.messages(nil)
		if !proto.Equal(call.req, again.req) || call.stream != again.stream || call.store != again.store || call.previousID != again.previousID {
			t.Fatalf("one body, two requests:\n%v\n%v", call.req, again.req)
		}
		a, _ := json.Marshal(call.echo)
		b, _ := json.Marshal(again.echo)
		if string(a) != string(b) {
			t.Fatalf("one body, two echoes:\n%s\n%s", a, b)
		}
		validRequest(t, v, call.req)
	})
}
