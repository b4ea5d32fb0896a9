package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// Decider makes the policy decision for a request (server/policy.Engine).
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
}

// decideChat asks the policy about a chat request before the model sees
// anything. A denial is answered here (403 with the decision id); an allow
// may narrow the tools offered to the engine. It returns the filter that
// keeps tool calls to the exposed tools.
func (s *Server) decideChat(w http.ResponseWriter, r *http.Request, rc *requestContext, call *chatCall) (toolFilter, bool) {
	req := call.req
	in := policy.Input{Key: rc.principal, ApplianceID: s.cfg.ApplianceID, Time: rc.received, Request: policy.Request{
		ID: rc.id, Endpoint: policy.EndpointChatCompletions, Model: req.GetModel(), Stream: call.stream,
		ToolChoice: policyToolChoice(req.GetToolChoice()), MessageCount: len(req.GetMessages()),
		Temperature: req.Temperature, MaxTokens: req.MaxTokens, ReasoningEffort: req.ReasoningEffort,
	}}
	for _, t := range req.GetTools() {
		in.Request.Tools = append(in.Request.Tools, t.GetName())
	}
	d, ok := s.decide(w, r, rc, in)
	if !ok {
		return toolFilter{}, false
	}
	if d.Narrowed {
		req.Tools = slices.DeleteFunc(req.Tools, func(t *inferencev1.Tool) bool { return !d.Exposes(t.GetName()) })
	}
	f := newToolFilter(req.GetTools(), s.log, rc.id)
	if call.oneToolCall {
		f.max = 1
	}
	return f, true
}

// decide runs one decision, answering a denial or a failure itself.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, rc *requestContext, in policy.Input) (policy.Decision, bool) {
	d, err := s.cfg.Policy.Decide(r.Context(), in)
	if err != nil {
		if s.clientGone(w, r, rc) {
			return d, false
		}
		s.log.Error("policy evaluation failed", "request_id", rc.id, "err", err)
		s.respondError(w, r, rc, internalError())
		return d, false
	}
	rc.decisionID = d.ID
	if !d.Allow {
		e := policyDenied("%s", d.Reason)
		e.PolicyDecisionID = d.ID
		s.respondError(w, r, rc, e)
		return d, false
	}
	return d, true
}

func policyToolChoice(tc *inferencev1.ToolChoice) policy.ToolChoice {
	switch tc.GetMode() {
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		return policy.ToolChoice{Mode: policy.ToolChoiceNone}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		return policy.ToolChoice{Mode: policy.ToolChoiceAuto}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return policy.ToolChoice{Mode: policy.ToolChoiceRequired}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		return policy.ToolChoice{Mode: policy.ToolChoiceFunction, Name: tc.GetFunctionName()}
	}
	return policy.ToolChoice{}
}

// toolFilter passes only tool calls to tools the request exposed to the
// engine, renumbering the calls that pass so the client sees indexes
// 0, 1, … An engine calling a tool it was not offered is never relayed.
// With max set (parallel_tool_calls false: 1), the calls past the first
// max that pass are dropped too, as OpenAI and vLLM keep only the first.
type toolFilter struct {
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

// loggedByFilter reports whether err is a broken tool call the
// toolFilter has already logged, with the request's id and what the engine
// did: the request's failure is not logged a second time in general words.
func loggedByFilter(err error) bool {
	return errors.Is(err, errToolCallChanged) || errors.Is(err, errToolCallIncomplete)
}

func newToolFilter(tools []*inferencev1.Tool, log *slog.Logger, requestID string) toolFilter {
	f := toolFilter{exposed: make(map[string]bool, len(tools)), log: log, requestID: requestID}
	for _, t := range tools {
		f.exposed[t.GetName()] = true
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
func (f *toolFilter) pass(d *inferencev1.ToolCallDelta) (index int, id, name string, err error) {
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
