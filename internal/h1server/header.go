package h1server

import (
	"bufio"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// snapshot is what the response's framing depends on, of the headers as
// they were at WriteHeader; the other headers are serialized then
// (conn.hdr), so that the handler's later changes are not sent, as with
// net/http, without cloning the map.
type snapshot struct {
	contentLength    string
	transferEncoding string
	connection       string
	hasConnection    bool
	hasType          bool
	hasEncoding      bool
	hasDate          bool
}

// Header keys kept out of the serialized headers: the framing is decided
// when the headers are committed.
const (
	excludeFraming = 1 << iota // Content-Length, Transfer-Encoding
	excludeConnection
	excludeType
)

func (w *response) takeSnapshot() {
	h := w.header
	w.snap = snapshot{
		contentLength:    h.Get("Content-Length"),
		transferEncoding: h.Get("Transfer-Encoding"),
		connection:       h.Get("Connection"),
		hasEncoding:      h.Get("Content-Encoding") != "",
	}
	_, w.snap.hasConnection = h["Connection"]
	_, w.snap.hasType = h["Content-Type"]
	_, w.snap.hasDate = h["Date"]
	exclude := excludeFraming | excludeConnection
	if w.status == http.StatusNotModified {
		exclude |= excludeType // net/http's suppressed headers of a 304
		w.snap.hasType = true  // and nothing sniffed
	}
	w.c.hdr = appendHeader(w.c.hdr[:0], &w.c.keys, h, exclude)
}

// appendHeader appends h's lines, sorted by key, as net/http writes them:
// invalid keys skipped, line breaks in values made spaces, values
// trimmed; trailers (Trailer:-prefixed keys) are not sent.
func appendHeader(dst []byte, keys *[]string, h http.Header, exclude int) []byte {
	ks := (*keys)[:0]
	for k := range h {
		switch {
		case exclude&excludeFraming != 0 && (k == "Content-Length" || k == "Transfer-Encoding"),
			exclude&excludeConnection != 0 && k == "Connection",
			exclude&excludeType != 0 && k == "Content-Type",
			strings.HasPrefix(k, http.TrailerPrefix),
			!httpguts.ValidHeaderFieldName(k):
			continue
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		for _, v := range h[k] {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			v = textproto.TrimString(v)
			for i := 0; i < len(v); i++ {
				b := v[i]
				if b == '\r' || b == '\n' {
					b = ' '
				}
				dst = append(dst, b)
			}
			dst = append(dst, "\r\n"...)
		}
	}
	clear(ks)
	*keys = ks[:0]
	return dst
}

// commit decides the response's framing and keep-alive, as net/http's
// chunkWriter.writeHeader does, and writes the status line and headers
// into the connection's buffer. p is the start of the body (for sniffing
// and, once the handler is done, its length).
func (w *response) commit(p []byte) {
	w.committed = true
	c := w.c
	if w.body.expect || w.continueOK {
		w.disableContinue()
	}
	keepAlives := !c.srv.inShutdown.Load()
	isHEAD := w.req.Method == http.MethodHead
	code := w.status
	bodyOK := bodyAllowedForStatus(code)
	s := &w.snap
	te := s.transferEncoding
	hasTE := te != ""
	handlerCL := s.contentLength
	connHdr, writeConn := s.connection, s.hasConnection
	var setCL []byte
	var setConn, setType string

	if w.handlerDone && !hasTE && bodyOK && handlerCL == "" && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		setCL = strconv.AppendInt(c.clen[:0], int64(len(p)), 10)
	}
	if w.wants10KeepAlive && keepAlives && handlerCL != "" && connHdr == "keep-alive" {
		w.closeAfterReply = false
	}
	hasCL := w.contentLength != -1
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyOK) {
		if !s.hasConnection {
			setConn = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfterReply = true
	}
	if connHdr == "close" || !keepAlives {
		w.closeAfterReply = true
	}
	if w.expectContinue && !w.body.eof {
		w.closeAfterReply = true // 100 Continue not sent, or the body not read
	}
	if w.body.rc != nil && w.req.ContentLength != 0 && !w.closeAfterReply {
		ended, tooBig := w.body.discardRest()
		switch {
		case tooBig:
			w.closeAfterReply = true
			writeConn, setConn = false, "close"
		case !ended:
			w.closeAfterReply = true
		}
	}
	if bodyOK {
		if !s.hasEncoding && !s.hasType && !hasTE && len(p) > 0 {
			setType = http.DetectContentType(p)
		}
	} else {
		handlerCL, hasTE, te = "", false, "" // suppressed for 1xx, 204, 304
	}
	if hasCL && hasTE && te != "identity" {
		c.srv.logger().Warn("h1server: both Transfer-Encoding and Content-Length set; Content-Length dropped")
		handlerCL, setCL, hasCL = "", nil, false
		w.contentLength = -1
	}
	switch {
	case isHEAD || !bodyOK || code == http.StatusNoContent:
	case hasCL:
	case w.req.ProtoAtLeast(1, 1):
		if te == "identity" {
			w.closeAfterReply = true
		} else {
			w.chunking = true
		}
	default:
		w.closeAfterReply = true
	}
	if w.chunking {
		handlerCL, setCL = "", nil
	}
	if w.closeAfterReply && (!keepAlives || !hasToken(connHdr, "close")) {
		writeConn, setConn = false, ""
		if w.req.ProtoAtLeast(1, 1) {
			setConn = "close"
		}
	}

	bw := c.bw
	writeStatusLine(bw, code, &c.scratch)
	_, _ = bw.Write(c.hdr)
	if handlerCL != "" {
		writeLine(bw, "Content-Length", handlerCL)
	}
	if writeConn {
		writeLine(bw, "Connection", connHdr)
	}
	if setType != "" {
		writeLine(bw, "Content-Type", setType)
	}
	if setConn != "" {
		writeLine(bw, "Connection", setConn)
	}
	if w.chunking {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if !s.hasDate {
		_, _ = bw.Write(dateLine(time.Now()))
	}
	if setCL != nil {
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(setCL)
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

func writeLine(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// writeStatusLine writes "HTTP/1.1 code text", as net/http does whatever
// the request's version.
func writeStatusLine(bw *bufio.Writer, code int, b *[20]byte) {
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.Write(strconv.AppendInt(b[:0], int64(code), 10))
	_, _ = bw.WriteString(" ")
	if text := http.StatusText(code); text != "" {
		_, _ = bw.WriteString(text)
	} else {
		_, _ = bw.WriteString("status code ")
		_, _ = bw.Write(strconv.AppendInt(b[:0], int64(code), 10))
	}
	_, _ = bw.WriteString("\r\n")
}

// date is the Date header line of one second, formatted once.
type date struct {
	sec  int64
	line []byte
}

var dateCache atomic.Pointer[date]

// dateLine is "Date: …\r\n" for now, formatted once a second.
func dateLine(now time.Time) []byte {
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.line
	}
	line := now.UTC().AppendFormat([]byte("Date: "), http.TimeFormat)
	line = append(line, "\r\n"...)
	dateCache.Store(&date{sec: sec, line: line})
	return line
}
