package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// receiptFixture writes, from a real audit log, the fleet CA, the
// receipts of two events of one tenant (JSON, and the header value) and
// an inclusion proof document of the first, in the central plane's form.
type receiptFixture struct {
	ca, receipt, header, other, proof string
	doc                               receipt.Receipt
}

func newReceiptFixture(t *testing.T) receiptFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := fleet.NewCA("test fleet CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_verify")
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(filepath.Join(dir, "audit"), auditlog.Options{Signer: app})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	var docs []receipt.Receipt
	for i, id := range []string{"req_1", "req_2"} {
		r, err := l.Append(context.Background(), auditlog.Event{RequestID: id, TenantID: "acme", KeyID: "key_1",
			Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200, PromptTokens: int64(i),
			RequestBody: []byte(`{}`), ResponseBody: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, *r.Signed())
	}
	if _, err := l.SignHeads(time.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := l.InclusionProof("acme", docs[0].Day, "req_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.Event("req_1")
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := leaf.Canonical(rec.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	path := make([]string, len(p.Hashes))
	for i, h := range p.Hashes {
		path[i] = hex.EncodeToString(h)
	}
	proof, err := json.Marshal(struct {
		ApplianceID string   `json:"appliance_id"`
		Day         string   `json:"day"`
		RequestID   string   `json:"request_id"`
		Sequence    uint64   `json:"sequence"`
		LeafIndex   uint64   `json:"leaf_index"`
		TreeSize    uint64   `json:"tree_size"`
		LeafHash    string   `json:"leaf_hash"`
		AuditPath   []string `json:"audit_path"`
		Head        any      `json:"head"`
		Leaf        string   `json:"leaf"`
	}{p.Head.ApplianceID, p.Head.Day, "req_1", docs[0].Sequence, p.LeafIndex, p.Head.EventCount,
		hex.EncodeToString(p.LeafHash), path, p.Head, string(canonical)})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	j0, _ := json.Marshal(docs[0])
	j1, _ := json.Marshal(docs[1])
	return receiptFixture{
		ca: write("fleet-ca.pem", ca.CertPEM), receipt: write("receipt.json", j0),
		header: write("receipt.txt", []byte(base64.RawURLEncoding.EncodeToString(j0)+"\n")),
		other:  write("other.json", j1), proof: write("proof.json", proof), doc: docs[0],
	}
}

// TestVerifyReceipt: `tollgate verify receipt` accepts a receipt's JSON
// or header value and fails a changed one with the kind of its fault;
// `verify proof --receipt` also checks the proof is of the promised leaf.
func TestVerifyReceipt(t *testing.T) {
	f := newReceiptFixture(t)
	raw, err := os.ReadFile(f.receipt)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tamper := func(name, old, new string) string {
		if !bytes.Contains(raw, []byte(old)) {
			t.Fatalf("%s: %q not in the receipt", name, old)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Replace(raw, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sig := f.doc.Signature
	// Another base64 letter in the first place: the signature changes
	// and stays canonical base64 (flipping a bit of the character could
	// make it '.', '*', '[' or '{', a malformed receipt instead).
	first := "A"
	if sig[0] == 'A' {
		first = "B"
	}
	flipped := first + sig[1:]
	seq := `"sequence":` + jsonUint(f.doc.Sequence)
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		verdict string
	}{
		{"receipt", []string{"verify", "receipt", f.receipt, "--ca", f.ca}, 0, `"ok":true,"document":"receipt"`},
		{"header value", []string{"verify", "receipt", f.header, "--ca", f.ca}, 0, `"request_id":"req_1"`},
		{"sequence", []string{"verify", "receipt", tamper("seq.json", seq, `"sequence":9`), "--ca", f.ca}, 11, `"error":"inclusion"`},
		{"request_id", []string{"verify", "receipt", tamper("id.json", `"req_1"`, `"req_3"`), "--ca", f.ca}, 11, `"error":"inclusion"`},
		{"signature", []string{"verify", "receipt", tamper("sig.json", sig, flipped), "--ca", f.ca}, 9, `"error":"signature"`},
		{"batch_root", []string{"verify", "receipt", tamper("root.json", f.doc.BatchRoot, strings.Repeat("0", 64)), "--ca", f.ca}, 11, `"error":"inclusion"`},
		{"unknown member", []string{"verify", "receipt", tamper("member.json", `{"schema"`, `{"x":1,"schema"`), "--ca", f.ca}, 4, `"error":"malformed"`},
		{"schema", []string{"verify", "receipt", tamper("schema.json", `receipt/v1`, `receipt/v2`), "--ca", f.ca}, 8, `"error":"head_invalid"`},
		{"another fleet", []string{"verify", "receipt", f.receipt, "--ca", filepath.Join(goldenDir, "fleet-ca.pem")}, 6, `"error":"certificate"`},
		{"proof of the receipt", []string{"verify", "proof", f.proof, "--ca", f.ca, "--receipt", f.header}, 0, `"receipt_bound":true`},
		{"proof of another receipt", []string{"verify", "proof", f.proof, "--ca", f.ca, "--receipt", f.other}, 12, `"error":"leaf_mismatch"`},
		{"proof with a changed receipt", []string{"verify", "proof", f.proof, "--ca", f.ca, "--receipt", tamper("sig2.json", sig, flipped)}, 9, `"error":"signature"`},
		{"receipt with --receipt", []string{"verify", "receipt", f.receipt, "--ca", f.ca, "--receipt", f.receipt}, 2, ``},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.verdict) {
			t.Errorf("%s: exit %d, %q %q; want %d with %s", c.name, code, out.String(), errOut.String(), c.code, c.verdict)
		}
	}
}

func jsonUint(v uint64) string { b, _ := json.Marshal(v); return string(b) }
