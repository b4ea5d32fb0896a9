package edge

import "testing"

// The inference API's validation errors reach the client in the words of
// its request.
func TestPublicViolation(t *testing.T) {
	for _, tc := range []struct{ in, param, msg string }{
		{"validation error: messages[0].text: value length must be at most 4194304 bytes [string.max_bytes]",
			"messages[0].content", "messages[0].content: value length must be at most 4194304 bytes [string.max_bytes]"},
		{"validation errors:\n - messages[2].parts.parts[1].text: value length must be at most 4194304 bytes [string.max_bytes]\n - tools[0].name: x",
			"messages[2].content[1].text", "messages[2].content[1].text: value length must be at most 4194304 bytes [string.max_bytes]"},
		{"validation error: inputs[3].text: value length must be at most 1048576 bytes [string.max_bytes]",
			"input[3]", "input[3]: value length must be at most 1048576 bytes [string.max_bytes]"},
		{"validation error: tools[1].description: value length must be at most 65536 bytes [string.max_bytes]",
			"tools[1].function.description", "tools[1].function.description: value length must be at most 65536 bytes [string.max_bytes]"},
		{"validation error: tools[0].parameters_json: value length must be at most 1048576 bytes [string.max_bytes]",
			"tools[0].function.parameters", "tools[0].function.parameters: value length must be at most 1048576 bytes [string.max_bytes]"},
		{"validation error: messages[0].tool_calls[1].name: value length must be at least 1 characters [string.min_len]",
			"messages[0].tool_calls[1].function.name", "messages[0].tool_calls[1].function.name: value length must be at least 1 characters [string.min_len]"},
	} {
		param, msg, ok := publicViolation(tc.in)
		if !ok || param != tc.param || msg != tc.msg {
			t.Errorf("%q:\n got %v %q %q\nwant %q %q", tc.in, ok, param, msg, tc.param, tc.msg)
		}
	}
	for _, in := range []string{"the model is not loaded", "validation error: request_id: value does not match regex", ""} {
		if _, _, ok := publicViolation(in); ok {
			t.Errorf("%q: rewritten", in)
		}
	}
}
