package openai

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestAppendEvent(t *testing.T) {
	got := AppendEvent([]byte("x"), []byte(`{"a":1}`))
	got = AppendEvent(got, []byte(Done))
	if want := "x" + "data: {\"a\":1}\n\n" + "data: [DONE]\n\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The reader takes what model servers send: LF or CRLF line ends, data
// with or without its space, comments and other fields between events.
func TestEventReader(t *testing.T) {
	stream := ": keep-alive\r\n\r\nevent: message\nid: 7\ndata: {\"a\":1}\n\ndata:{\"b\":2}\r\n\r\n" +
		"data:  two spaces\n\nretry: 10\ndata: [DONE]\n\ndata: last, without its newline"
	for _, r := range []io.Reader{strings.NewReader(stream), iotest.OneByteReader(strings.NewReader(stream))} {
		e := NewEventReader(r, 1<<10)
		var got []string
		for {
			p, err := e.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(p))
		}
		want := []string{`{"a":1}`, `{"b":2}`, ` two spaces`, Done, "last, without its newline"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// A line longer than the bound fails the stream, whether it ends within
// the reader's buffer or past it.
func TestEventReaderBound(t *testing.T) {
	for _, n := range []int{100, 200 << 10} {
		long := "data: " + strings.Repeat("x", n) + "\n\n"
		e := NewEventReader(strings.NewReader("data: ok\n\n"+long), n+6)
		if p, err := e.Next(); err != nil || string(p) != "ok" {
			t.Fatalf("first event %q, %v", p, err)
		}
		if _, err := e.Next(); !errors.Is(err, ErrEventTooLong) {
			t.Errorf("line of %d bytes, bound %d: %v", n+7, n+6, err)
		}
		e = NewEventReader(strings.NewReader(long), n+7)
		if p, err := e.Next(); err != nil || len(p) != n {
			t.Errorf("line of %d bytes within a bound of %d: %d bytes, %v", n+7, n+7, len(p), err)
		}
	}
}

// A read error other than the end is returned as it is.
func TestEventReaderError(t *testing.T) {
	boom := errors.New("boom")
	e := NewEventReader(io.MultiReader(strings.NewReader("data: a\n"), iotest.ErrReader(boom)), 1<<10)
	if p, err := e.Next(); err != nil || string(p) != "a" {
		t.Fatalf("%q, %v", p, err)
	}
	if _, err := e.Next(); !errors.Is(err, boom) {
		t.Errorf("got %v", err)
	}
}

func TestAppendNamedEvent(t *testing.T) {
	got := string(AppendNamedEvent(nil, "response.created", `{"a":1}`))
	if want := "event: response.created\ndata: {\"a\":1}\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A reader released in the middle of a stream leaves nothing of it to the
// next reader, which may get the same buffer.
func TestEventReaderRelease(t *testing.T) {
	for range 3 {
		a := NewEventReader(strings.NewReader("data: a1\n\ndata: a2\n\ndata: a3\n\n"), 1<<10)
		if p, err := a.Next(); err != nil || string(p) != "a1" {
			t.Fatalf("first stream: %q, %v", p, err)
		}
		a.Release()
		a.Release() // a second release is harmless
		b := NewEventReader(strings.NewReader("data: b1\n\n"), 1<<10)
		if p, err := b.Next(); err != nil || string(p) != "b1" {
			t.Fatalf("second stream: %q, %v", p, err)
		}
		if p, err := b.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("second stream after its end: %q, %v", p, err)
		}
		b.Release()
	}
}
