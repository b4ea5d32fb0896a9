package edge_test

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/receipt"
	"github.com/tollgate-dev/tollgate/server/keys"
)

const keyOtherTenant = "tgk_other_all" // every model, another tenant

// receiptStack is the edge over a real audit log that signs receipts.
func receiptStack(t *testing.T) (*stack, *auditlog.Log, *x509.Certificate) {
	t.Helper()
	now := time.Now()
	ca, err := fleet.NewCA("test fleet CA", now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_edge")
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(t.TempDir(), auditlog.Options{Signer: app})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	auth := testAuth()
	auth[keyOtherTenant] = keys.NewPrincipal("ten_other", "key_other", "key_other", true, nil, 0, 0, nil, time.Time{})
	return newStack(t, stackConfig{auditLog: l, auth: auth}), l, ca.Cert
}

// parseReceipt reads a receipt document strictly and verifies it.
func parseReceipt(doc []byte, ca *x509.Certificate) (receipt.Receipt, error) {
	var r receipt.Receipt
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, err
	}
	return r, receipt.Verify(r, ca)
}

// wantReceiptOf checks that doc is a verifying receipt of request id whose
// leaf is the one the log holds.
func wantReceiptOf(t *testing.T, l *auditlog.Log, ca *x509.Certificate, doc []byte, id string) {
	t.Helper()
	r, err := parseReceipt(doc, ca)
	if err != nil {
		t.Fatalf("receipt of %s: %v\n%s", id, err, doc)
	}
	rec, err := l.Event(id)
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestID != id || r.TenantID != "ten_test" || r.LeafHash != hex.EncodeToString(rec.LeafHash) ||
		r.Sequence != rec.Leaf.Sequence || r.LeafIndex != rec.LeafIndex {
		t.Fatalf("receipt %+v is not of the event recorded for %s", r, id)
	}
	// A flipped byte anywhere fails: the document no longer parses or
	// no longer verifies.
	for _, i := range []int{0, len(doc) / 3, len(doc) / 2, len(doc) - 2} {
		bad := bytes.Clone(doc)
		bad[i] ^= 0x01
		if _, err := parseReceipt(bad, ca); err == nil {
			t.Errorf("receipt of %s with byte %d flipped still verifies", id, i)
		}
	}
}

// TestReceiptHeader: a recorded non-streamed reply, success or refusal,
// carries its receipt in x-tollgate-receipt.
func TestReceiptHeader(t *testing.T) {
	s, l, ca := receiptStack(t)
	for _, tc := range []struct {
		name, path, key, body string
		status                int
	}{
		{"chat", "/v1/chat/completions", keyAll, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
		{"completions", "/v1/completions", keyAll, `{"model":"builtin/echo","prompt":"hi"}`, http.StatusOK},
		{"embeddings", "/v1/embeddings", keyAll, `{"model":"builtin/embed","input":"hi"}`, http.StatusOK},
		{"responses", "/v1/responses", keyAll, `{"model":"builtin/echo","input":"hi"}`, http.StatusOK},
		{"refused by scopes", "/v1/chat/completions", keyEmbed, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`, http.StatusForbidden},
		{"malformed", "/v1/chat/completions", keyAll, `{"model":`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, tc.key, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			v := r.header.Get("x-tollgate-receipt")
			if v == "" {
				t.Fatal("no x-tollgate-receipt header")
			}
			doc, err := base64.RawURLEncoding.DecodeString(v)
			if err != nil {
				t.Fatalf("x-tollgate-receipt is not unpadded base64url: %v", err)
			}
			wantReceiptOf(t, l, ca, doc, r.header.Get("x-request-id"))
		})
	}
}

// TestReceiptOfAStream: a stream's headers go before its event is
// recorded, so its receipt is fetched by GET /v1/receipts/{id}; another
// tenant, and an id never recorded, get 404 not_found.
func TestReceiptOfAStream(t *testing.T) {
	s, l, ca := receiptStack(t)
	r := s.post(t, "/v1/chat/completions", keyAll, `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"hi there"}]}`)
	if r.status != http.StatusOK || !bytes.HasSuffix(r.body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if v := r.header.Get("x-tollgate-receipt"); v != "" {
		t.Fatalf("a stream's headers carry a receipt %q before its event is recorded", v)
	}
	id := r.header.Get("x-request-id")
	// Any key of the tenant may fetch it.
	got := s.do(t, http.MethodGet, "/v1/receipts/"+id, keyEcho, "")
	wantReceiptOf(t, l, ca, wantOK(t, got), id)
	// The lookup is a recorded request too, with a receipt of its own.
	if got.header.Get("x-tollgate-receipt") == "" {
		t.Error("the receipt lookup has no receipt of its own")
	}

	for name, tc := range map[string]struct{ key, id string }{
		"another tenant": {keyOtherTenant, id},
		"never recorded": {keyAll, "req_00000000000000000000000000"},
		"not an id":      {keyAll, "nonsense"},
	} {
		t.Run(name, func(t *testing.T) {
			got := s.do(t, http.MethodGet, "/v1/receipts/"+tc.id, tc.key, "")
			if got.status != http.StatusNotFound {
				t.Fatalf("status %d, want 404: %s", got.status, got.body)
			}
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(got.body, &env); err != nil || env.Error.Code != "not_found" {
				t.Fatalf("not the not_found envelope: %s", got.body)
			}
		})
	}
}
