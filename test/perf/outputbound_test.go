package perf_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// hugeMessageBytes is the size of the message that once streamed back as
// large a reply (an 84 MB stream for 800 KB, docs/measurements.md).
const hugeMessageBytes = 800 << 10

// echoOutputLimit is builtin/echo's own output limit
// (docs/builtin-engine.md).
const echoOutputLimit = 8192

// TestHugeEchoIsBounded sends `tollgate dev` (its own process) a streamed
// builtin/echo chat with an 800 KB message, no max_tokens, on a key
// without a TPD or a maximum of its own: the reply stops at the model's
// limit of 8,192 tokens with finish_reason length. It logs what the
// request cost the gateway's memory (the rise of its peak resident set
// above its resident set before) and the audit log's disk (the data
// directory's allocated blocks), for one request and for ten at once;
// -v prints the figures recorded in docs/measurements.md. The bounds
// asserted are the (50 MB of memory, 5 MB of disk for one
// request), several times what the bounded reply costs.
func TestHugeEchoIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts tollgate dev")
	}
	bin := buildTollgate(t)
	data := t.TempDir()
	dev := startDev(t, bin, devOptions{data: data})
	url := dev.base + "/chat/completions"
	body := hugeEchoRequest(t)

	// A first request, so that what every request needs once (the key
	// cache, the day's tree, pools) is not counted.
	if r := streamEcho(t, url, hugeEchoRequestOf("warm up")); r.finish != "stop" {
		t.Fatalf("warm-up finished %q", r.finish)
	}
	for _, n := range []int{1, 10} {
		t.Run(fmt.Sprintf("%d-at-once", n), func(t *testing.T) {
			rss := procStatus(t, dev.pid, "VmRSS")
			resetPeak(t, dev.pid)
			disk := allocatedBytes(t, data)
			results := make([]echoResult, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { results[i] = streamEcho(t, url, body) })
			}
			wg.Wait()
			peak := procStatus(t, dev.pid, "VmHWM")
			grown := allocatedBytes(t, data) - disk
			for i, r := range results {
				if r.finish != "length" || r.tokens != echoOutputLimit || r.completionTokens != echoOutputLimit {
					t.Fatalf("request %d: finish %q after %d tokens (usage %d), want length after %d",
						i, r.finish, r.tokens, r.completionTokens, echoOutputLimit)
				}
			}
			t.Logf("%d request(s) of %d B, each streaming %d B (%d tokens): gateway resident set %.1f MB before, peak %.1f MB (+%.1f MB); data directory +%.2f MB (%.2f MB a request)",
				n, len(body), results[0].bytes, results[0].tokens, mb(rss), mb(peak), mb(peak-rss), mb(grown), mb(grown)/float64(n))
			if n == 1 {
				if peak-rss > 50<<20 {
					t.Errorf("one bounded request raised the gateway's memory by %.1f MB, over 50 MB", mb(peak-rss))
				}
				if grown > 5<<20 {
					t.Errorf("one bounded request grew the audit log by %.2f MB, over 5 MB", mb(grown))
				}
			}
		})
	}
}

type echoResult struct {
	finish                   string
	tokens, completionTokens int
	bytes                    int
}

// hugeEchoRequest is the streamed chat of an 800 KB message of random
// lowercase words (compressing as text does, not as a repetition).
func hugeEchoRequest(t *testing.T) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < hugeMessageBytes {
		for range 1 + rng.IntN(8) {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		b.WriteByte(' ')
	}
	return hugeEchoRequestOf(b.String())
}

func hugeEchoRequestOf(message string) []byte {
	content, _ := json.Marshal(message)
	return []byte(`{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + string(content) + `}]}`)
}

// streamEcho sends body with the seed's key without a TPD and reads the
// stream as it comes, keeping only its counts.
func streamEcho(t *testing.T, url string, body []byte) echoResult {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return echoResult{}
	}
	req.Header.Set("Authorization", "Bearer tgk_test_acme_rpm_only")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return echoResult{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
		return echoResult{}
	}
	var r echoResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var text strings.Builder
	for sc.Scan() {
		line := sc.Bytes()
		r.bytes += len(line) + 1
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Errorf("chunk %.200s: %v", data, err)
			return r
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				r.finish = *c.FinishReason
			}
		}
		if chunk.Usage != nil {
			r.completionTokens = chunk.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		t.Error(err)
	}
	r.tokens = len(strings.Fields(text.String()))
	return r
}

// procStatus reads a size field (in kB) of /proc/PID/status, in bytes.
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// resetPeak resets the process's peak resident set (VmHWM) to its
// resident set now (writing 5 to /proc/PID/clear_refs).
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak resident set: %v", err)
	}
}

// allocatedBytes sums the blocks allocated to the files under dir.
func allocatedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
