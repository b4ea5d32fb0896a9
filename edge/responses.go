package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// responseIDPrefix starts a response's id: resp_ and the request id's
// own part, so that a stored response names the audit event of the
// request that made it.
const responseIDPrefix = "resp_"

// responseIDs are the ids of one response and of its items.
type responseIDs struct{ resp, msg, fc string }

func newResponseIDs(requestID string) responseIDs {
	own := strings.TrimPrefix(requestID, ids.RequestPrefix)
	return responseIDs{resp: responseIDPrefix + own, msg: "msg_" + own, fc: "fc_" + own + "_"}
}

// responseOfItem is the id of the response an output item's id belongs
// to: msg_X, msg_X_n and fc_X_n are resp_X's; "" for any other id.
func responseOfItem(itemID string) string {
	for _, p := range []string{"msg_", "fc_"} {
		if rest, ok := strings.CutPrefix(itemID, p); ok {
			own, _, _ := strings.Cut(rest, "_")
			if own != "" {
				return responseIDPrefix + own
			}
		}
	}
	return ""
}

// storedItem finds the output item id of one of the tenant's stored
// responses, as an input item; nil when there is none.
func (s *Server) storedItem(rc *requestContext, id string) *openai.ResponseInputItem {
	rid := responseOfItem(id)
	if rid == "" {
		return nil
	}
	stored, err := rc.call.LoadResponse(rid, "")
	if err != nil {
		return nil
	}
	var resp struct {
		Output []openai.ResponseInputItem `json:"output"`
	}
	if unmarshal(stored.Body, &resp) != nil {
		return nil
	}
	for i := range resp.Output {
		if resp.Output[i].ID == id {
			return &resp.Output[i]
		}
	}
	return nil
}

// callItemID is the id of the response's function_call item i.
func (r responseIDs) callItemID(i int) string { return r.fc + strconv.Itoa(i) }

// responses serves POST /v1/responses: the request is translated into a
// chat request and governed as one (docs/gateway-api.md), the reply
// translated back into a response object or its stream of events.
func (s *Server) responses(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	call, aerr := decodeResponses(rc.call.RequestBody, rc.id, func(id string) *openai.ResponseInputItem {
		return s.storedItem(rc, id)
	})
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.call.Model = call.req.GetModel()
	var history []*inferencev1.Message
	if call.previousID != "" {
		prev, err := rc.call.LoadResponse(call.previousID, "previous_response_id")
		if err != nil {
			s.refuse(w, r, rc, err)
			return
		}
		history = prev.History
	}
	call.messages(history)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	reply, first, ok := s.startChat(ctx, w, r, rc, call.req, pipeline.ChatOptions{Stream: call.stream, OneToolCall: call.oneToolCall})
	if !ok {
		return
	}
	if call.stream {
		s.streamResponse(w, r, rc, call, reply, first)
		return
	}
	s.plainResponse(w, r, rc, call, reply, first)
}

// plainResponse accumulates the reply into one response object, stores
// it (when asked), records it, and sends it.
func (s *Server) plainResponse(w http.ResponseWriter, r *http.Request, rc *requestContext, call *responsesCall, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	acc, ok := s.wholeReply(w, r, rc, reply, ev)
	if !ok {
		return
	}
	rids := newResponseIDs(rc.id)
	resp := s.responseObject(rc, call, rids)
	status := finishStatus(resp, acc.finish)
	text := acc.content.String()
	if text != "" || len(acc.calls) == 0 {
		resp.Output = append(resp.Output, &openai.MessageItem{ID: rids.msg, Type: openai.ItemMessage, Status: status,
			Content: []openai.OutputText{openai.NewOutputText(text)}, Role: openai.RoleAssistant})
	}
	for i, c := range acc.calls {
		resp.Output = append(resp.Output, &openai.FunctionCallItem{ID: rids.callItemID(i), Type: openai.ItemFunctionCall,
			Status: openai.ResponseStatusCompleted, Arguments: c.Function.Arguments, CallID: c.ID, Name: c.Function.Name})
	}
	resp.Usage = responseUsage(acc.usage)
	body := mustMarshal(resp)
	used := pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens)

	// As respondUsed, but the response is stored once its event is
	// recorded, before the client can ask for it.
	s.limitHeaders(w, rc)
	code := http.StatusOK
	if err := rc.call.Finish(r.Context(), code, body, &used); err != nil {
		e := recordError(w, err)
		e.RequestID = rc.id
		code, body = e.Status, mustMarshal(e.envelope())
	} else {
		if call.store {
			rc.call.StoreResponse(rids.resp, pipeline.StoredResponse{Body: body, History: call.history(replyMessage(text, acc.calls))})
		}
		setReceipt(w, rc)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = rc.out.write(body)
	s.count(rc, code)
}

// responseObject is the response with what the request set, no output
// yet and status in_progress.
func (s *Server) responseObject(rc *requestContext, call *responsesCall, rids responseIDs) *openai.Response {
	resp := call.echo
	resp.ID, resp.Object = rids.resp, openai.ObjectResponse
	resp.CreatedAt = rc.call.Received().Unix()
	resp.Status = openai.ResponseStatusInProgress
	resp.Output = []openai.OutputItem{}
	return &resp
}

// finishStatus sets the response's status by how the reply finished, and
// returns its items' status: a reply cut by max_output_tokens (or a
// content filter) is incomplete.
func finishStatus(resp *openai.Response, f inferencev1.FinishReason) string {
	switch f {
	case inferencev1.FinishReason_FINISH_REASON_LENGTH:
		resp.Status, resp.IncompleteDetails = openai.ResponseStatusIncomplete, &openai.IncompleteDetails{Reason: openai.IncompleteMaxOutputTokens}
	case inferencev1.FinishReason_FINISH_REASON_CONTENT_FILTER:
		resp.Status, resp.IncompleteDetails = openai.ResponseStatusIncomplete, &openai.IncompleteDetails{Reason: openai.IncompleteContentFilter}
	default:
		resp.Status = openai.ResponseStatusCompleted
	}
	return resp.Status
}

func responseUsage(u *inferencev1.Usage) *openai.ResponseUsage {
	return &openai.ResponseUsage{InputTokens: u.GetPromptTokens(), OutputTokens: u.GetCompletionTokens(),
		TotalTokens: pipeline.AddTokens(u.GetPromptTokens(), u.GetCompletionTokens())}
}

// replyMessage is the reply as the assistant message a continuation
// gives the engine.
func replyMessage(text string, calls []openai.ToolCall) *inferencev1.Message {
	m := &inferencev1.Message{Role: inferencev1.Role_ROLE_ASSISTANT}
	if text != "" || len(calls) == 0 {
		m.Content = &inferencev1.Message_Text{Text: text}
	}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, &inferencev1.ToolCall{Id: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return m
}

// getResponse serves GET /v1/responses/{id}: a stored response of the
// key's tenant, as it was sent; 404 for any other id.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if err := rc.call.AdmitLookup(r.Context()); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	stored, err := rc.call.LoadResponse(r.PathValue("id"), "")
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	s.respond(w, r, rc, http.StatusOK, stored.Body)
}

// deleteResponse serves DELETE /v1/responses/{id}.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if err := rc.call.AdmitLookup(r.Context()); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	id := r.PathValue("id")
	if err := rc.call.DeleteResponse(id); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	s.respond(w, r, rc, http.StatusOK, mustMarshal(openai.DeletedResponse{ID: id, Object: openai.ObjectResponseDeleted, Deleted: true}))
}
