package edge

import (
	"net/http"
	"strconv"
	"strings"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// responseStream writes a streamed response as OpenAI does: named events,
// each with its sequence_number (0, 1, …). The output items are opened
// and closed in the order the reply makes them: the text is a message
// item with one output_text part; each tool call a function_call item.
// An item is closed when the next one opens or the reply ends.
type responseStream struct {
	sse  *sseWriter
	seq  int64
	rids responseIDs
	resp *openai.Response

	next     int // the output index of the next item
	messages int // message items opened so far

	// The open item: a message (msg non-nil) or a call (call non-nil).
	index int
	msg   *openai.MessageItem
	text  strings.Builder
	call  *openai.FunctionCallItem
	// callIndex is the client's index of the open call.
	callIndex int
}

// emit writes one event; v holds st.seq, the number of this event, which
// emit then advances.
func (st *responseStream) emit(name string, v any) error {
	st.seq++
	return st.sse.named(name, mustMarshal(v))
}

func (st *responseStream) lifecycle(name string) error {
	return st.emit(name, openai.ResponseEvent{Type: name, Response: st.resp, SequenceNumber: st.seq})
}

func (st *responseStream) openMessage() error {
	id := st.rids.msg
	if st.messages > 0 {
		id += "_" + strconv.Itoa(st.messages)
	}
	st.messages++
	st.index, st.next = st.next, st.next+1
	st.msg = &openai.MessageItem{ID: id, Type: openai.ItemMessage, Status: openai.ResponseStatusInProgress,
		Content: []openai.OutputText{}, Role: openai.RoleAssistant}
	st.text.Reset()
	if err := st.emit(openai.EventOutputItemAdded, openai.OutputItemEvent{Type: openai.EventOutputItemAdded,
		Item: st.msg, OutputIndex: st.index, SequenceNumber: st.seq}); err != nil {
		return err
	}
	return st.emit(openai.EventContentPartAdded, openai.ContentPartEvent{Type: openai.EventContentPartAdded,
		ItemID: id, OutputIndex: st.index, Part: openai.NewOutputText(""), SequenceNumber: st.seq})
}

func (st *responseStream) textDelta(text string) error {
	if st.msg == nil {
		if err := st.closeItem(openai.ResponseStatusCompleted); err != nil {
			return err
		}
		if err := st.openMessage(); err != nil {
			return err
		}
	}
	st.text.WriteString(text)
	return st.emit(openai.EventOutputTextDelta, openai.TextDeltaEvent{Type: openai.EventOutputTextDelta,
		Delta: text, ItemID: st.msg.ID, Logprobs: []struct{}{}, OutputIndex: st.index, SequenceNumber: st.seq})
}

func (st *responseStream) toolCall(d *inferencev1.ToolCallDelta) error {
	if d.GetId() != "" {
		if err := st.closeItem(openai.ResponseStatusCompleted); err != nil {
			return err
		}
		st.index, st.next = st.next, st.next+1
		st.callIndex = int(d.GetIndex())
		st.call = &openai.FunctionCallItem{ID: st.rids.callItemID(st.callIndex), Type: openai.ItemFunctionCall,
			Status: openai.ResponseStatusInProgress, CallID: d.GetId(), Name: d.GetName()}
		if err := st.emit(openai.EventOutputItemAdded, openai.OutputItemEvent{Type: openai.EventOutputItemAdded,
			Item: st.call, OutputIndex: st.index, SequenceNumber: st.seq}); err != nil {
			return err
		}
	}
	if st.call == nil || int(d.GetIndex()) != st.callIndex || d.GetArguments() == "" {
		// A piece of a call already closed cannot be told any more:
		// the engines stream one call after the other.
		return nil
	}
	st.call.Arguments += d.GetArguments()
	return st.emit(openai.EventFunctionArgsDelta, openai.ArgumentsDeltaEvent{Type: openai.EventFunctionArgsDelta,
		Delta: d.GetArguments(), ItemID: st.call.ID, OutputIndex: st.index, SequenceNumber: st.seq})
}

// closeItem closes the open item, if any, with status.
func (st *responseStream) closeItem(status string) error {
	switch {
	case st.msg != nil:
		m := st.msg
		st.msg = nil
		text := st.text.String()
		if err := st.emit(openai.EventOutputTextDone, openai.TextDoneEvent{Type: openai.EventOutputTextDone,
			ItemID: m.ID, Logprobs: []struct{}{}, OutputIndex: st.index, SequenceNumber: st.seq, Text: text}); err != nil {
			return err
		}
		if err := st.emit(openai.EventContentPartDone, openai.ContentPartEvent{Type: openai.EventContentPartDone,
			ItemID: m.ID, OutputIndex: st.index, Part: openai.NewOutputText(text), SequenceNumber: st.seq}); err != nil {
			return err
		}
		done := *m
		done.Status, done.Content = status, []openai.OutputText{openai.NewOutputText(text)}
		st.resp.Output = append(st.resp.Output, &done)
		return st.emit(openai.EventOutputItemDone, openai.OutputItemEvent{Type: openai.EventOutputItemDone,
			Item: &done, OutputIndex: st.index, SequenceNumber: st.seq})
	case st.call != nil:
		c := st.call
		st.call = nil
		if err := st.emit(openai.EventFunctionArgsDone, openai.ArgumentsDoneEvent{Type: openai.EventFunctionArgsDone,
			Arguments: c.Arguments, ItemID: c.ID, OutputIndex: st.index, SequenceNumber: st.seq}); err != nil {
			return err
		}
		done := *c
		done.Status = status
		st.resp.Output = append(st.resp.Output, &done)
		return st.emit(openai.EventOutputItemDone, openai.OutputItemEvent{Type: openai.EventOutputItemDone,
			Item: &done, OutputIndex: st.index, SequenceNumber: st.seq})
	}
	return nil
}

// streamResponse relays the reply as the Responses API's events:
// response.created and response.in_progress, each item's events, then
// response.completed (or response.incomplete when cut by
// max_output_tokens), whose response is what is stored. The audit event
// is durable before that last event is written. A reply that fails after
// the 200 ends with response.failed. As for chat, a stream that breaks
// keeps its whole token reservation charged.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, rc *requestContext, call *responsesCall, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	if !s.startStream(w, r, rc) {
		return
	}
	sse := newSSEWriter(w, &rc.out, s.core.Audited())
	sse.more = reply.Ready
	defer s.count(rc, http.StatusOK)
	rids := newResponseIDs(rc.id)
	st := &responseStream{sse: sse, rids: rids, resp: s.responseObject(rc, call, rids)}
	recorded := false
	defer func() {
		if !recorded {
			_ = rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes())
		}
	}()
	if st.lifecycle(openai.EventResponseCreated) != nil || st.lifecycle(openai.EventResponseInProgress) != nil {
		return
	}
	var acc accumulator
	for {
		acc.add(ev)
		if text := ev.GetContent(); text != "" {
			if st.textDelta(text) != nil {
				return
			}
		}
		for _, d := range ev.GetToolCalls() {
			if st.toolCall(d) != nil {
				return
			}
		}
		if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
			status := finishStatus(st.resp, f)
			if st.next == 0 { // no output at all: an empty message
				if st.openMessage() != nil {
					return
				}
			}
			if st.closeItem(status) != nil {
				return
			}
			st.resp.Usage = responseUsage(ev.GetUsage())
			name := openai.EventResponseCompleted
			if st.resp.Status == openai.ResponseStatusIncomplete {
				name = openai.EventResponseIncomplete
			}
			payload := mustMarshal(openai.ResponseEvent{Type: name, Response: st.resp, SequenceNumber: st.seq})
			st.seq++
			rc.call.Settle(pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens))
			recorded = true
			sse.keepNamed(name, payload)
			if err := rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes()); err != nil {
				st.fail(recordError(nil, err))
				return
			}
			if call.store {
				rc.call.StoreResponse(rids.resp, pipeline.StoredResponse{Body: mustMarshal(st.resp),
					History: call.history(replyMessage(acc.content.String(), acc.calls))})
			}
			_ = sse.named(name, payload)
			return
		}
		var err error
		if ev, err = reply.Next(); err != nil {
			recorded = true
			s.streamResponseError(r, st, rc, err)
			return
		}
	}
}

// fail writes response.failed, the response with e as its error, without
// recording it (the caller has, or cannot).
func (st *responseStream) fail(e *apiError) {
	st.resp.Status = openai.ResponseStatusFailed
	st.resp.Error = &openai.ResponseError{Code: e.Code, Message: e.Message}
	_ = st.lifecycle(openai.EventResponseFailed)
}

// streamResponseError ends a stream that failed after its 200, as
// streamError does for chat: recorded, then response.failed.
func (s *Server) streamResponseError(r *http.Request, st *responseStream, rc *requestContext, err error) {
	var e *apiError
	switch {
	case shuttingDown(r):
		e = unavailable()
	case r.Context().Err() != nil:
		_ = rc.call.Record(r.Context(), http.StatusOK, st.sse.sent.Bytes())
		return
	default:
		pe := pipeline.AsError(err)
		if !pe.Logged {
			s.log.Warn("stream failed after it started", "request_id", rc.id, "err", err)
		}
		e = fromPipeline(pe)
	}
	st.resp.Status = openai.ResponseStatusFailed
	st.resp.Error = &openai.ResponseError{Code: e.Code, Message: e.Message}
	payload := mustMarshal(openai.ResponseEvent{Type: openai.EventResponseFailed, Response: st.resp, SequenceNumber: st.seq})
	st.seq++
	st.sse.keepNamed(openai.EventResponseFailed, payload)
	_ = rc.call.Record(r.Context(), http.StatusOK, st.sse.sent.Bytes())
	_ = st.sse.named(openai.EventResponseFailed, payload)
}
