package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fixtureZstd is a log written by the code that stored bodies as zstd
// frames (codec 1), before S2: audit.db format v3, version 4 journal
// frames, no signer. Four events applied, two journaled and not applied
// (as a crash leaves them) and one stream's start marker still open. A
// test of that code (3ccfe75), as TestWriteFixtureV2 did for fixtureV2,
// wrote it; this code writes S2 and cannot write it again. Its recorded
// paths are /var/lib/tollgate/audit's, and audit.db is compacted.
const fixtureZstd = "testdata/format-v3-zstd"

// fixtureZstdApplied events of fixtureZstdEvents are in its audit.db; the
// rest are journal frames past the applied end, as a crash leaves them.
const fixtureZstdApplied = 4

// fixtureZstdEvents are the events of fixtureZstd, in sequence order:
// chat completions shaped as a model server answers them, a stream, and
// bodies stored as they are (too small, random).
func fixtureZstdEvents() []Event {
	chat := func(n int, q, a string) Event {
		ev := event(n, "acme")
		ev.RequestBody = fmt.Appendf(nil, `{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":%q}],"max_tokens":256}`, q)
		ev.ResponseBody = fmt.Appendf(nil, `{"id":"chatcmpl-%032d","object":"chat.completion","created":1772366400,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":31,"total_tokens":52,"completion_tokens":21}}`, n, a)
		return ev
	}
	random := make([]byte, 2048)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	evs := []Event{
		chat(1, "What is the capital of France?", "Paris is the capital of France."),
		event(2, "globex"),
		streamEvent(3, 120),
		{RequestBody: bytes.Repeat([]byte(`{"a":1}`), 4), ResponseBody: random},
		streamEvent(5, 40),
		chat(6, "And of Italy?", "Rome is the capital of Italy."),
	}
	for i := range evs {
		n := i + 1
		base := event(n, "acme")
		if evs[i].RequestID == "" {
			base.RequestBody, base.ResponseBody = evs[i].RequestBody, evs[i].ResponseBody
			evs[i] = base
		}
		evs[i].RequestID = fmt.Sprintf("req_fixture%d", n)
		evs[i].Time = day1.Add(time.Duration(i) * time.Second)
		evs[i].TenantID, evs[i].KeyID = []string{"acme", "globex"}[i%2], "key_fixture"
	}
	return evs
}

// fixtureZstdStart is the stream fixtureZstd started and never recorded:
// the open start marker recovery turns into an interrupted event.
func fixtureZstdStart() StreamStart {
	return StreamStart{RequestID: "req_fixture7", TenantID: "acme", KeyID: "key_fixture",
		Time: day1.Add(10 * time.Second), Endpoint: "/v1/chat/completions", Model: "meta-llama/Llama-3.1-8B-Instruct",
		PromptTokens: 12, RequestBody: []byte(`{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"Tell me a long story about the sea, the sea, the sea."}],"stream":true,"stream_options":{"include_usage":true}}`)}
}

// TestReadsFormatV3Zstd: a log whose bodies were stored as zstd frames
// opens, replays its journaled frames and its open start marker (zstd
// too), and returns every event with its bodies byte for byte; events
// appended since, stored as S2, join the same day's journal and read back
// beside them, before and after a reopen.
func TestReadsFormatV3Zstd(t *testing.T) {
	dir := copyFixture(t, fixtureZstd)
	opts := Options{ApplianceID: "app_fixture", Now: func() time.Time { return day1.Add(time.Hour) }}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	evs := fixtureZstdEvents()
	if got, want := l.Stats().Replayed, uint64(len(evs)-fixtureZstdApplied); got != want {
		t.Fatalf("replayed %d frames, want %d", got, want)
	}
	// The open marker, recorded at Open as the stream's interrupted event.
	started := fixtureZstdStart()
	interrupted := started.interrupted()
	interrupted.Time = started.Time
	evs = append(evs, interrupted)
	more := []Event{streamEvent(8, 200), event(9, "acme")}
	evs = appendAfterFixture(t, l, evs, more)
	check := func(l *Log) {
		t.Helper()
		checkFixtureEvents(t, l, evs)
		if rec, err := l.Event(started.RequestID); err != nil || rec.Leaf.Status != StatusInterrupted {
			t.Fatalf("%s: status %d, %v; want the stream interrupted", started.RequestID, rec.Leaf.Status, err)
		}
	}
	check(l)
	// What each is stored as: zstd, or as sent, as that code wrote them;
	// as this code stores them for the events appended since (the
	// interrupted stream's short request body, which S2 does not make
	// smaller, as sent).
	want := []byte{codecZstd, codecNone, codecZstd, codecNone, codecZstd, codecZstd, codecNone, codecS2, codecNone}
	err = l.db.View(func(tx *bolt.Tx) error {
		for i, w := range want {
			r, err := decodeEventRecord(tx.Bucket(bucketEvents).Get(eventKey("2026-03-01", uint64(i+1))))
			if err != nil {
				return err
			}
			if r.codec != w {
				t.Errorf("event %d stored with codec %d, want %d", i+1, r.codec, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	check(l)
}
