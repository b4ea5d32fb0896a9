package vllm

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req to w as (*http.Request).Write does, byte for
// byte, when req is of the shape the engine sends (plainRequest); any
// other request is written by req.Write. net/http formats the request
// line and the Host and User-Agent lines with fmt and sorts the headers
// through a pool: on the sequential proxied load that was ~5 µs of a
// request's path (2 % of the gateway's samples, perf), for ~60 bytes of
// text known but for the path, the host and the length.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host, ruri, ok := plainRequest(req)
	if !ok {
		return req.Write(w)
	}
	_, _ = w.WriteString(req.Method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(ruri)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	_, _ = w.WriteString("\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: ")
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
	_, _ = w.WriteString("\r\n")
	var buf [16]string
	keys := buf[:0]
	for k := range req.Header {
		if !excludedHeader(k) && httpguts.ValidHeaderFieldName(k) { // net/http drops an invalid name
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			_, _ = w.WriteString(k)
			_, _ = w.WriteString(": ")
			_, _ = w.WriteString(v)
			_, _ = w.WriteString("\r\n")
		}
	}
	_, err := w.WriteString("\r\n")
	if err != nil {
		closeBody(req)
		return err
	}
	return writeBody(w, req)
}

// writeBody copies req's body, of req.ContentLength bytes, after its
// header, and closes it, with net/http's checks: what the body holds past
// the length is read and counted, and a body of another length fails.
func writeBody(w io.Writer, req *http.Request) error {
	n, err := io.Copy(w, io.LimitReader(req.Body, req.ContentLength))
	if err == nil {
		var extra int64
		extra, err = io.Copy(io.Discard, req.Body)
		n += extra
	}
	if cerr := req.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != req.ContentLength {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return err
}

// plainRequest reports whether writeRequest writes req itself, and its
// Host line's value and request URI: a POST of a body of known length, made by
// http.NewRequest over bytes (GetBody set: net/http then writes the
// header and body in one flush), to a host of plain ASCII (which net/http
// writes as is) and a path without control bytes, with no Close,
// transfer encoding, trailer, User-Agent or client trace, and header
// values that net/http would not rewrite (no CR or LF, no space or tab at
// either end).
func plainRequest(req *http.Request) (host, ruri string, ok bool) {
	if req.URL == nil {
		return "", "", false
	}
	host = req.Host
	if host == "" {
		host = req.URL.Host
	}
	if req.Method != http.MethodPost || req.URL.Opaque != "" || req.Close || req.TransferEncoding != nil || req.Trailer != nil ||
		req.Body == nil || req.Body == http.NoBody || req.GetBody == nil || req.ContentLength <= 0 ||
		!plainHost(host) || httptrace.ContextClientTrace(req.Context()) != nil {
		return "", "", false
	}
	if _, ok := req.Header["User-Agent"]; ok {
		return "", "", false
	}
	for _, vv := range req.Header {
		for _, v := range vv {
			if !plainValue(v) {
				return "", "", false
			}
		}
	}
	ruri = req.URL.RequestURI()
	for i := range len(ruri) {
		if b := ruri[i]; b < ' ' || b == 0x7f {
			return "", "", false
		}
	}
	return host, ruri, true
}

// excludedHeader is what (*http.Request).Write leaves out of the header
// map: the lines it writes itself, and Transfer-Encoding and Trailer.
func excludedHeader(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// plainHost: a host[:port] of letters, digits, dots, hyphens, colons and
// brackets, which net/http's Host line takes as is (no punycode, no IPv6
// zone to remove, a valid Host header).
func plainHost(h string) bool {
	if h == "" {
		return false
	}
	for i := range len(h) {
		switch b := h[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.', b == '-', b == ':', b == '[', b == ']':
		default:
			return false
		}
	}
	return true
}

// plainValue: a header value net/http writes unchanged (it turns CR and
// LF into spaces, then trims spaces and tabs at both ends).
func plainValue(v string) bool {
	for i := range len(v) {
		if v[i] == '\r' || v[i] == '\n' {
			return false
		}
	}
	if v == "" {
		return true
	}
	first, last := v[0], v[len(v)-1]
	return first != ' ' && first != '\t' && last != ' ' && last != '\t'
}
