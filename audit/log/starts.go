package log

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// A stream's event is appended at its end, so a crash in the middle of a
// stream would leave no trace of a request whose client already got bytes.
// Before a stream's first byte leaves the gateway, Start makes its
// existence durable: a start marker, group-committed and fdatasynced in
// the start file (StartsFile, in the journal directory). A marker is not
// an event: it takes no sequence and is no leaf. On Open, every marker
// whose request has no event is recorded as an interrupted event
// (StatusInterrupted, recoverStarts), and the file is emptied.
//
// The file is a run of frames, each: payload length (u32), CRC-32C of
// the payload (u32), then
//
//	version (u8, 1) | start length (u32) | start, JSON (startRecord)
//	| request body length as received (u64) | codec (u8) | stored request body
//
// Markers of finished streams are dropped by rewriting the file with the
// open ones once it is more than twice their size and over
// startsCompactMin, so it stays bounded by the streams in flight.

// StartsFile is the name of the start file in the journal directory.
const StartsFile = "streams.started"

// StatusInterrupted is the status of the event recovery records for a
// stream that sent bytes and was cut by a crash of the gateway before its
// event was recorded: its client got 200 and an unknown part of the
// stream. No client ever receives it.
const StatusInterrupted = 599

const (
	startVersion = 1
	// startFixedLen is a start payload's fixed part.
	startFixedLen = 1 + 4 + 8 + 1
	// maxStartBatch bounds the markers of one group commit.
	maxStartBatch = 2048
)

// startsCompactMin is the size below which the start file is never
// rewritten (a variable for tests).
var startsCompactMin int64 = 16 << 20

// StreamStart is what is known of a stream when its first byte is about
// to be sent.
type StreamStart struct {
	RequestID string
	TenantID  string
	KeyID     string
	// Time is when the request was received; zero means now.
	Time             time.Time
	Endpoint         string
	Model            string
	PromptTokens     int64
	PolicyDecisionID string
	// RequestBody is the body as received; the log copies it.
	RequestBody []byte
}

// startRecord is a marker's metadata, as the start file holds it.
type startRecord struct {
	RequestID        string `json:"request_id"`
	TenantID         string `json:"tenant_id"`
	KeyID            string `json:"key_id"`
	Time             string `json:"time"`
	Endpoint         string `json:"endpoint"`
	Model            string `json:"model"`
	PromptTokens     int64  `json:"prompt_tokens"`
	PolicyDecisionID string `json:"policy_decision_id,omitempty"`
}

// Start durably records that the stream of s is about to send its first
// byte, and returns once that is on disk (one fdatasync, shared by the
// starts that arrive together). Once the stream's event is appended the
// marker is spent; if the process dies first, the next Open records an
// interrupted event for it. ctx bounds only the wait. It is BeginStart
// and then the pending start's Wait.
func (l *Log) Start(ctx context.Context, s StreamStart) error {
	p, err := l.BeginStart(ctx, s)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// PendingStart is a start on its way to the disk (BeginStart).
type PendingStart struct {
	r *startReq
}

// BeginStart queues the start of s for the start file and returns without
// waiting for its sync, so that the caller can do other work (ask the
// model for the reply) while it syncs. Nothing of the stream may be sent
// before the pending start's Wait returned nil: until then the stream's
// existence may not survive a crash. The stream's event is appended only
// once Wait returned, whatever it returned: an event that overtook its
// marker would leave the marker open (held in memory and in the start
// file) until the next Open, which passes it over. A start begun for a
// stream that never begins (the model refused, say) costs only its
// marker: the call's event spends it as any other, and if the process
// dies first the next Open records the request as interrupted
// (StatusInterrupted), which it was. ctx bounds only the wait for room
// in the queue.
func (l *Log) BeginStart(ctx context.Context, s StreamStart) (*PendingStart, error) {
	r, err := l.prepareStart(s)
	if err != nil {
		return nil, err
	}
	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return nil, ErrClosed
	}
	if l.tryStartInline(ctx, r) {
		l.closeMu.RUnlock()
		return &PendingStart{r: r}, nil
	}
	select {
	case l.starts.queue <- r:
		l.closeMu.RUnlock()
	case <-ctx.Done():
		l.closeMu.RUnlock()
		return nil, fmt.Errorf("audit log: start of %s not recorded: %w", s.RequestID, ctx.Err())
	}
	return &PendingStart{r: r}, nil
}

// Wait returns once the start is on disk, or the error that kept it off
// (the stream must then not begin). ctx bounds only the wait: a start
// whose wait ended may still be recorded. Wait may be called more than
// once, from one goroutine or several.
func (p *PendingStart) Wait(ctx context.Context) error {
	select {
	case <-p.r.done:
		return p.r.err
	case <-ctx.Done():
		return fmt.Errorf("audit log: start of %s: %w (it may still be recorded)", p.r.id, ctx.Err())
	}
}

// prepareStart validates s as the event it may become and encodes its
// frame.
func (l *Log) prepareStart(s StreamStart) (*startReq, error) {
	if s.Time.IsZero() {
		s.Time = l.opts.Now()
	}
	// The event recovery would append must be valid: checked now, while
	// the stream can still be refused. Its bodies are the request body
	// alone, so what it stores is the marker's.
	p, err := l.prepare(s.interrupted())
	if err != nil {
		return nil, err
	}
	rec, err := json.Marshal(startRecord{RequestID: s.RequestID, TenantID: s.TenantID, KeyID: s.KeyID,
		Time: leaf.FormatTime(s.Time), Endpoint: s.Endpoint, Model: s.Model, PromptTokens: s.PromptTokens,
		PolicyDecisionID: s.PolicyDecisionID})
	if err != nil {
		return nil, fmt.Errorf("%w: start of %q: %w", ErrInvalid, s.RequestID, err)
	}
	codec, stored := p.codec, p.stored
	be := binary.BigEndian
	frame := make([]byte, frameHeaderLen, frameHeaderLen+startFixedLen+len(rec)+len(stored))
	frame = append(frame, startVersion)
	frame = be.AppendUint32(frame, uint32(len(rec)))
	frame = append(frame, rec...)
	frame = be.AppendUint64(frame, uint64(len(s.RequestBody)))
	frame = append(frame, codec)
	frame = append(frame, stored...)
	payload := frame[frameHeaderLen:]
	be.PutUint32(frame, uint32(len(payload)))
	be.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
	return &startReq{id: s.RequestID, frame: frame, done: make(chan struct{})}, nil
}

// interrupted is the event recovery appends for a stream that started
// and never recorded its event: what was known at its start, the status
// StatusInterrupted, no response body (what was sent is not known) and
// no completion tokens.
func (s StreamStart) interrupted() Event {
	return Event{RequestID: s.RequestID, TenantID: s.TenantID, KeyID: s.KeyID, Time: s.Time,
		Endpoint: s.Endpoint, Model: s.Model, Status: StatusInterrupted, PromptTokens: s.PromptTokens,
		PolicyDecisionID: s.PolicyDecisionID, RequestBody: s.RequestBody}
}

// decodeStart decodes a checked start payload.
func decodeStart(p []byte) (StreamStart, error) {
	be := binary.BigEndian
	if len(p) < startFixedLen || p[0] != startVersion {
		return StreamStart{}, errors.New("not a start marker of version 1")
	}
	n := int(be.Uint32(p[1:]))
	if len(p)-5 < n+9 {
		return StreamStart{}, errors.New("short start record")
	}
	var rec startRecord
	if err := json.Unmarshal(p[5:5+n], &rec); err != nil {
		return StreamStart{}, fmt.Errorf("start record: %w", err)
	}
	at, err := leaf.ParseTime(rec.Time)
	if err != nil {
		return StreamStart{}, fmt.Errorf("start record: %w", err)
	}
	pos := 5 + n
	reqLen := be.Uint64(p[pos:])
	codec := p[pos+8]
	body, err := decodeBodies(codec, p[pos+9:], reqLen)
	if err != nil {
		return StreamStart{}, err
	}
	return StreamStart{RequestID: rec.RequestID, TenantID: rec.TenantID, KeyID: rec.KeyID, Time: at,
		Endpoint: rec.Endpoint, Model: rec.Model, PromptTokens: rec.PromptTokens,
		PolicyDecisionID: rec.PolicyDecisionID, RequestBody: body}, nil
}
