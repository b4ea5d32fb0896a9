package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
)

// bundleFixture is a data directory whose audit log holds a day of two
// tenants, with a signed head and one event of acme after it, and its
// fleet CA.
type bundleFixture struct {
	data, ca, day string
	app           *fleet.Appliance
	fleet         *fleet.CA
}

func newBundleFixture(t *testing.T) bundleFixture {
	t.Helper()
	data := t.TempDir()
	ca, err := fleet.NewCA("test fleet CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_bundle")
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.SaveAppliance(data, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "fleet-ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	f := bundleFixture{data: data, ca: caFile, app: app, fleet: ca}
	l := f.open(t)
	defer func() { _ = l.Close() }()
	appendEv := func(id, tenant, model string, status int) {
		r, err := l.Append(context.Background(), auditlog.Event{RequestID: id, TenantID: tenant, KeyID: "key_1",
			Endpoint: "/v1/chat/completions", Model: model, Status: status, PromptTokens: 3,
			RequestBody:  []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"` + id + `"}]}`),
			ResponseBody: []byte(strings.Repeat("data: "+id+"\n\n", 20))})
		if err != nil {
			t.Fatal(err)
		}
		f.day = r.Day
	}
	for i := range 7 {
		tenant := "acme"
		if i%3 == 2 {
			tenant = "other"
		}
		model, status := "builtin/echo", 200
		if i == 4 {
			model, status = "builtin/lorem", 403
		}
		appendEv(fmt.Sprintf("req_%d", i), tenant, model, status)
	}
	if _, err := l.SignHeads(time.Now()); err != nil {
		t.Fatal(err)
	}
	appendEv("req_late", "acme", "builtin/echo", 200) // after the head: uncovered
	return f
}

func (f bundleFixture) open(t *testing.T) *auditlog.Log {
	t.Helper()
	l, err := auditlog.Open(filepath.Join(f.data, "audit"), auditlog.Options{Signer: f.app})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (f bundleFixture) export(t *testing.T, out string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"audit", "export", "--data", f.data, "--tenant", "acme", "--day", f.day, "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("export: exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func verifyBundleFile(t *testing.T, file, ca string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify", "bundle", file, "--ca", ca}, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// A bundle exported through the running appliance's socket and one from
// the stopped appliance's files are the same document, and verify.
func TestAuditExportRunningAndStopped(t *testing.T) {
	f := newBundleFixture(t)
	dir := t.TempDir()
	running, stopped := filepath.Join(dir, "running.json"), filepath.Join(dir, "stopped.json")

	l := f.open(t)
	stop := serveExport(context.Background(), f.data, l, slog.New(slog.DiscardHandler))
	// The appliance holds audit.db: only the socket can serve the export.
	if msg := f.export(t, running); !strings.Contains(msg, "from the running appliance") {
		t.Fatalf("export while running: %q", msg)
	}
	stop()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if msg := f.export(t, stopped); !strings.Contains(msg, "from the stopped appliance's files") {
		t.Fatalf("export while stopped: %q", msg)
	}
	a, b := readBundle(t, running), readBundle(t, stopped)
	a.ExportedAt, b.ExportedAt = "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("the two exports differ:\n%s\n%s", ja, jb)
	}
	for _, file := range []string{running, stopped} {
		code, out := verifyBundleFile(t, file, f.ca)
		if code != 0 {
			t.Fatalf("verify bundle %s: exit %d: %s", file, code, out)
		}
		var v verdict
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Bundle == nil {
			t.Fatalf("verdict %q: %v", out, err)
		}
		want := bundleVerdict{Events: 5, Uncovered: 1, Receipts: 6, LastSequence: 7, HeadSignedAt: v.Bundle.HeadSignedAt,
			BodiesPresent: 6, Models: map[string]uint64{"builtin/echo": 5, "builtin/lorem": 1},
			Statuses: map[string]uint64{"200": 5, "403": 1}}
		got, _ := json.Marshal(v.Bundle)
		exp, _ := json.Marshal(want)
		if !bytes.Equal(got, exp) || v.TenantID != "acme" || v.ApplianceID != "app_bundle" || v.Day != f.day {
			t.Fatalf("summary %s of %s/%s/%s, want %s", got, v.TenantID, v.ApplianceID, v.Day, exp)
		}
	}
	// No temporary file is left beside the output.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d files in the output directory, want 2", len(entries))
	}
}

// testBundle is a bundle document with its members in their fixed order,
// to change a part and write it back.
type testBundle struct {
	Schema      string           `json:"schema"`
	TenantID    string           `json:"tenant_id"`
	ApplianceID string           `json:"appliance_id"`
	Day         string           `json:"day"`
	ExportedAt  string           `json:"exported_at"`
	Head        map[string]any   `json:"head"`
	Events      []map[string]any `json:"events"`
	Uncovered   []map[string]any `json:"uncovered"`
}

func readBundle(t *testing.T, file string) testBundle {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b testBundle
	if err := dec.Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeBundle(t *testing.T, file string, b testBundle) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every part of a bundle is checked: each change fails with its kind and
// a message naming what is wrong.
func TestVerifyBundleTampered(t *testing.T) {
	f := newBundleFixture(t)
	dir := t.TempDir()
	orig := filepath.Join(dir, "bundle.json")
	f.export(t, orig)
	otherPEM, _, err := fleet.IssueAppliance(f.fleet, "app_other")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string {
		c := byte('0')
		if s[i] == '0' {
			c = '1'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for _, c := range []struct {
		name    string
		change  func(b *testBundle)
		code    int
		verdict string
		message string
	}{
		{"unchanged", func(*testBundle) {}, 0, `"ok":true`, `"events":5`},
		{"altered request body", func(b *testBundle) {
			b.Events[1]["request_body"] = base64.StdEncoding.EncodeToString([]byte(`{"model":"builtin/echo","messages":[]}`))
		}, 13, `"error":"body_mismatch"`, "request_body hashes to"},
		{"altered response body", func(b *testBundle) {
			raw, _ := base64.StdEncoding.DecodeString(b.Events[0]["response_body"].(string))
			raw[0] ^= 1
			b.Events[0]["response_body"] = base64.StdEncoding.EncodeToString(raw)
		}, 13, `"error":"body_mismatch"`, "response_body hashes to"},
		{"body said pruned", func(b *testBundle) {
			b.Events[0]["bodies"] = "pruned"
		}, 4, `"error":"malformed"`, "with a body"},
		{"altered leaf member", func(b *testBundle) {
			b.Events[2]["leaf"] = strings.Replace(b.Events[2]["leaf"].(string), `"status":200`, `"status":500`, 1)
		}, 11, `"error":"inclusion"`, "bundle.events[2]"},
		{"dropped event", func(b *testBundle) {
			b.Events = append(b.Events[:1], b.Events[2:]...)
		}, 14, `"error":"incomplete"`, "an event is missing, added or moved"},
		{"dropped last event", func(b *testBundle) {
			b.Events = b.Events[:4]
		}, 14, `"error":"incomplete"`, "the head covers 5 events, the bundle holds 4"},
		{"reordered events", func(b *testBundle) {
			b.Events[0], b.Events[1] = b.Events[1], b.Events[0]
		}, 14, `"error":"incomplete"`, "leaf_index"},
		{"leaf indices renumbered after a reorder", func(b *testBundle) {
			b.Events[0], b.Events[1] = b.Events[1], b.Events[0]
			b.Events[0]["leaf_index"], b.Events[1]["leaf_index"] = b.Events[1]["leaf_index"], b.Events[0]["leaf_index"]
		}, 11, `"error":"inclusion"`, "audit path"},
		{"altered proof path", func(b *testBundle) {
			p := b.Events[0]["audit_path"].([]any)
			p[0] = flip(p[0].(string), 5)
		}, 11, `"error":"inclusion"`, "the audit path leads from leaf_hash"},
		{"altered head signature", func(b *testBundle) {
			s := b.Head["signature"].(string)
			i := strings.IndexAny(s[20:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") + 20
			b.Head["signature"] = s[:i] + strings.ToLower(s[i:i+1]) + s[i+1:]
		}, 9, `"error":"signature"`, "bundle.head"},
		{"swapped certificate", func(b *testBundle) {
			b.Head["certificate"] = string(otherPEM)
		}, 7, `"error":"appliance_mismatch"`, "app_other"},
		{"swapped receipt", func(b *testBundle) {
			b.Events[0]["receipt"] = b.Events[1]["receipt"]
		}, 12, `"error":"leaf_mismatch"`, "the receipt"},
		{"altered uncovered leaf", func(b *testBundle) {
			b.Uncovered[0]["leaf"] = strings.Replace(b.Uncovered[0]["leaf"].(string), `"prompt_tokens":3`, `"prompt_tokens":4`, 1)
		}, 12, `"error":"leaf_mismatch"`, "bundle.uncovered[0]"},
		{"another tenant named", func(b *testBundle) {
			b.TenantID = "other"
		}, 10, `"error":"proof_mismatch"`, "the bundle is of other"},
		{"unknown member", func(b *testBundle) {
			b.Events[0]["note"] = "x"
		}, 4, `"error":"malformed"`, `unknown member \"note\"`},
		{"exported_at with a fraction", func(b *testBundle) {
			b.ExportedAt = strings.TrimSuffix(b.ExportedAt, "Z") + ".5Z"
		}, 4, `"error":"malformed"`, "bundle.exported_at"},
		{"schema", func(b *testBundle) {
			b.Schema = "tollgate-audit-bundle/v2"
		}, 4, `"error":"malformed"`, "bundle.schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := readBundle(t, orig)
			c.change(&b)
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			writeBundle(t, file, b)
			code, out := verifyBundleFile(t, file, f.ca)
			if code != c.code || !strings.Contains(out, c.verdict) || !strings.Contains(out, c.message) {
				t.Errorf("exit %d, %s; want %d with %s and %q", code, out, c.code, c.verdict, c.message)
			}
		})
	}
}

// Past body retention a bundle still proves every event's metadata: its
// bodies are said pruned, and a body given for a pruned event is refused.
func TestAuditExportPrunedBodies(t *testing.T) {
	f := newBundleFixture(t)
	l := f.open(t)
	days, err := l.Prune(time.Now().Add(100 * 24 * time.Hour)) // past the default 90 days
	if err != nil || len(days) != 1 || days[0] != f.day {
		t.Fatalf("Prune = %v, %v; want [%s]", days, err, f.day)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pruned.json")
	f.export(t, file)
	code, out := verifyBundleFile(t, file, f.ca)
	if code != 0 || !strings.Contains(out, `"bodies_present":0,"bodies_pruned":6,"bodies_lost":0`) {
		t.Fatalf("verify bundle: exit %d: %s", code, out)
	}
	b := readBundle(t, file)
	b.Events[0]["request_body"] = base64.StdEncoding.EncodeToString([]byte("{}"))
	writeBundle(t, file, b)
	if code, out := verifyBundleFile(t, file, f.ca); code != 4 || !strings.Contains(out, `bodies \"pruned\" with a body`) {
		t.Fatalf("a body for a pruned event: exit %d: %s", code, out)
	}
}

// failingSource is the real log, but its proofs fail after the first:
// an export that breaks after its first bytes were sent.
type failingSource struct {
	*auditlog.Log
	proofs int
}

func (s *failingSource) InclusionProof(tenant, day, requestID string, treeSize uint64) (auditlog.InclusionProof, error) {
	if s.proofs++; s.proofs > 1 {
		return auditlog.InclusionProof{}, errors.New("disk gone")
	}
	return s.Log.InclusionProof(tenant, day, requestID, treeSize)
}

// An export the appliance could not finish, after it had answered 200
// (only the trailer tells), leaves nothing at --out (nor a temporary
// file), and says why.
func TestAuditExportCutShort(t *testing.T) {
	f := newBundleFixture(t)
	l := f.open(t)
	defer func() { _ = l.Close() }()
	stop := serveExport(context.Background(), f.data, &failingSource{Log: l}, slog.New(slog.DiscardHandler))
	defer stop()
	dir := t.TempDir()
	out := filepath.Join(dir, "bundle.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"audit", "export", "--data", f.data, "--tenant", "acme", "--day", f.day, "--out", out}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "disk gone") {
		t.Fatalf("export: exit %d, %q %q; want 1 naming the failure", code, stdout.String(), stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left after a failed export: %v", entries)
	}
}
