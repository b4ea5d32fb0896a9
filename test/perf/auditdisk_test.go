package perf_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// TestAuditDiskPerStreamedEvent measures what a long streamed reply costs
// the audit log on disk, through the whole gateway: the journal's frame
// (leaf and bodies, compressed) and the event's share of audit.db, for
// builtin/echo's SSE and for a vLLM stream (vllmfake, relayed by the vllm
// engine), against the assembled reply (the same request's
// chat.completion, not streamed). A streamed event must cost at most about
// twice its assembled reply. The prompt is English prose (the start of
// docs/central.md), which both models echo; -v prints the figures
// recorded in docs/measurements.md.
func TestAuditDiskPerStreamedEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts appliances")
	}
	const events = 30
	fake := vllmfake.Start(t, vllmfake.Model{ID: upstreamModel, MaxModelLen: 32768})
	for _, words := range []int{300, 2000} {
		prompt := proseWords(t, words)
		for _, model := range []string{"builtin/echo", "vllm/" + upstreamModel} {
			t.Run(fmt.Sprintf("%s,%d-words", model, words), func(t *testing.T) {
				engine, err := vllm.New(vllm.Config{Namespace: "vllm", URL: fake.URL})
				if err != nil {
					t.Fatal(err)
				}
				if err := engine.Refresh(t.Context()); err != nil {
					t.Fatal(err)
				}
				engines := []inference.Engine{engine}
				plain, stop := startAudited(t, engines, nil)
				assembled := chat(t, plain, model, prompt, false)
				stop()

				dir := t.TempDir()
				empty := auditDBBytes(t, openAudit(t, dir, "app_disk"), dir)
				l := openAudit(t, filepath.Join(dir, "measured"), "app_disk")
				url, stop := startAudited(t, engines, l)
				var sse []byte
				for range events {
					sse = chat(t, url, model, prompt, true)
				}
				req := len(proseChat(model, prompt, true))
				stop()
				st := l.Stats()
				db := auditDBBytes(t, l, filepath.Join(dir, "measured")) - empty
				if st.Events != events {
					t.Fatalf("%d events audited, want %d", st.Events, events)
				}
				journal := float64(st.JournalBytes) / events
				perDB := float64(db) / events
				cost := journal + perDB
				ratio := cost / float64(len(assembled))
				// What the journal would hold with the bodies as sent.
				raw := float64(st.JournalBytes-st.StoredBodyBytes+st.BodyBytes) / events
				t.Logf("request %d B, SSE %d B (%.0f B/word), assembled reply %d B; bodies stored in %.0f B (%.1f%% of %d); "+
					"journal %.0f B/event (%.0f with bodies as sent), audit.db %.0f B/event; on disk %.0f B/event = %.2f x the assembled reply (%.1f x with bodies as sent)",
					req, len(sse), float64(len(sse))/float64(words), len(assembled),
					float64(st.StoredBodyBytes)/events, 100*float64(st.StoredBodyBytes)/float64(st.BodyBytes), st.BodyBytes/events,
					journal, raw, perDB, cost, ratio, (raw+perDB)/float64(len(assembled)))
				if words >= 2000 && ratio > 2 {
					t.Errorf("a streamed event of %d words costs %.0f bytes on disk, %.2f times its assembled reply of %d", words, cost, ratio, len(assembled))
				}

				// The same SSE for a short question: a reply that does
				// not repeat its request, as a real model's does not.
				nl := openAudit(t, filepath.Join(dir, "novel"), "app_disk")
				question := []byte(proseChat(model, "Describe the central plane of Tollgate in detail.", true))
				for i := range events {
					_, err := nl.Append(t.Context(), auditlog.Event{RequestID: fmt.Sprintf("req_novel%d", i), TenantID: "acme",
						KeyID: "key_novel", Endpoint: "/v1/chat/completions", Model: model, Status: 200,
						RequestBody: question, ResponseBody: sse})
					if err != nil {
						t.Fatal(err)
					}
				}
				nst := nl.Stats()
				novel := float64(nst.JournalBytes)/events + float64(auditDBBytes(t, nl, filepath.Join(dir, "novel"))-empty)/events
				t.Logf("the same SSE after a %d-byte question: bodies stored in %.0f B, on disk %.0f B/event = %.2f x the assembled reply",
					len(question), float64(nst.StoredBodyBytes)/events, novel, novel/float64(len(assembled)))
				if words >= 2000 && novel > 2*float64(len(assembled)) {
					t.Errorf("a streamed reply of %d words after a short question costs %.0f bytes on disk, over twice its assembled reply of %d", words, novel, len(assembled))
				}
			})
		}
	}
}

// proseWords returns the first n words of docs/central.md.
func proseWords(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/central.md")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Fields(string(b))
	if len(all) < n {
		t.Fatalf("docs/central.md has %d words, fewer than %d", len(all), n)
	}
	return strings.Join(all[:n], " ")
}

func proseChat(model, prompt string, stream bool) string {
	content, _ := json.Marshal(prompt)
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}],"stream":%v}`, model, content, stream)
}

// chat sends one chat completion and returns its body.
func chat(t *testing.T, url, model, prompt string, stream bool) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(proseChat(model, prompt, stream)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tgk_test_acme_all")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %.300s", resp.StatusCode, err, body)
	}
	if stream && !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("a stream without [DONE]: %.300s", body)
	}
	return body
}

// openAudit opens an audit log in dir, signing with a dev certificate.
func openAudit(t *testing.T, dir, id string) *auditlog.Log {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	signer, _, err := fleet.EnsureDev(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(filepath.Join(dir, "audit"), auditlog.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// auditDBBytes closes l, whose directory is dir, and returns the bytes of
// the pages its audit.db gives its buckets: the database's size less the
// space bbolt reserved ahead.
func auditDBBytes(t *testing.T, l *auditlog.Log, dir string) int {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "audit", auditlog.FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			s := b.Stats()
			n += s.BranchAlloc + s.LeafAlloc + s.InlineBucketInuse
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startAudited starts an appliance serving engines besides the built-in
// ones, recording to l when it is not nil, and returns its chat
// completion URL and what stops it.
func startAudited(t *testing.T, engines []inference.Engine, l *auditlog.Log) (string, func()) {
	t.Helper()
	cfg := appliance.Config{Engines: engines, ApplianceID: "app_disk"}
	if l != nil {
		cfg.Audit = l
	}
	return runAppliance(t, cfg)
}
