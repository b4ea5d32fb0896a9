package pipeline

import (
	"testing"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// Every piece of a streamed tool call goes through toolFilter.pass: once
// its table exists, deciding a call and passing its later pieces (argument
// text, a repeated id or name) allocates nothing.
func TestToolFilterPassAllocs(t *testing.T) {
	f := newToolFilter([]*inferencev1.Tool{{Name: "get_weather"}}, nil, "req_test")
	pieces := []*inferencev1.ToolCallDelta{
		{Index: 0, Id: "call_1", Name: "get_weather"},
		{Index: 0, Arguments: `{"city":`},
		{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `"Oslo"}`},
		{Index: 1, Id: "call_2", Name: "delete_repo"},
		{Index: 1, Arguments: `{}`},
	}
	run := func() {
		clear(f.calls)
		f.next = 0
		for _, d := range pieces {
			if _, _, _, err := f.pass(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	run() // makes the table
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("pass allocates %v times per reply, want 0", n)
	}
}
