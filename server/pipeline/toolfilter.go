package pipeline

import (
	"errors"
	"log/slog"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// ToolFilter passes only tool calls to tools the request exposed to the
// engine, renumbering the calls that pass so the client sees indexes
// 0, 1, … An engine calling a tool it was not offered is never relayed.
// With max set (parallel_tool_calls false: 1), the calls past the first
// max that pass are dropped too, as OpenAI and vLLM keep only the first.
type ToolFilter struct {
	exposed map[string]bool
	max     int
	// what the first piece of each engine index decided.
	calls map[int32]decidedCall
	next  int
	// log and requestID report a piece that changes its call.
	log       *slog.Logger
	requestID string
}

// decidedCall is a call as its first piece decided it: the client's index
// (-1 for a dropped call), the name the client sees, and the call's id
// once a piece has given one.
type decidedCall struct {
	index int
	name  string
	id    string
}

// errToolCallChanged fails a reply in which a later piece of a tool call
// names another tool or gives the call another id, and errToolCallIncomplete
// one in which a call's first piece lacks its id or name (the inference
// contract: the first piece of a call carries both): broken engine
// answers, which the client gets as an engine that failed mid-reply.
var (
	errToolCallChanged    = errors.New("engine changed a tool call after its first piece")
	errToolCallIncomplete = errors.New("engine began a tool call without its id or name")
)

func newToolFilter(tools []*inferencev1.Tool, log *slog.Logger, requestID string) *ToolFilter {
	f := &ToolFilter{log: log, requestID: requestID}
	if len(tools) > 0 { // most requests expose none: a nil map, read only
		f.exposed = make(map[string]bool, len(tools))
		for _, t := range tools {
			f.exposed[t.GetName()] = true
		}
	}
	return f
}

// pass maps a piece to the client's call index (-1: the call is dropped)
// and the call's name. id is the call's id on its first piece, which opens
// the call for the client, and "" on the others, so the id is sent once.
// The first piece of a call decides index, id and name, and must carry the
// id and the name (else errToolCallIncomplete). A later piece may repeat
// them; one that names another tool or gives another id is
// errToolCallChanged, whether or not the call is exposed: the only name
// the client ever sees is the one that was checked, and a call never
// reaches it half-renamed or without an id.
func (f *ToolFilter) pass(d *inferencev1.ToolCallDelta) (index int, id, name string, err error) {
	if f.calls == nil {
		f.calls = make(map[int32]decidedCall)
	}
	c, seen := f.calls[d.GetIndex()]
	if !seen {
		if d.GetId() == "" || d.GetName() == "" {
			if f.log != nil {
				f.log.Warn("engine began a tool call without its id or name; the reply fails", "request_id", f.requestID,
					"index", d.GetIndex(), "id", d.GetId(), "name", d.GetName())
			}
			return -1, "", "", errToolCallIncomplete
		}
		c = decidedCall{index: -1, name: d.GetName(), id: d.GetId()}
		if f.exposed[c.name] && (f.max == 0 || f.next < f.max) {
			c.index, f.next = f.next, f.next+1
		}
		f.calls[d.GetIndex()] = c
		return c.index, c.id, c.name, nil
	}
	if n := d.GetName(); n != "" && n != c.name {
		if f.log != nil {
			f.log.Warn("engine renamed a tool call; the reply fails", "request_id", f.requestID,
				"index", d.GetIndex(), "name", c.name, "renamed_to", n)
		}
		return -1, "", "", errToolCallChanged
	}
	if id := d.GetId(); id != "" && id != c.id {
		if f.log != nil {
			f.log.Warn("engine changed a tool call's id; the reply fails", "request_id", f.requestID,
				"index", d.GetIndex(), "name", c.name, "id", c.id, "changed_to", id)
		}
		return -1, "", "", errToolCallChanged
	}
	return c.index, "", c.name, nil
}
