package verify_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/bundle"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/verify"
)

// bundleSeed writes a real evidence bundle: a day of one tenant's events
// from an audit log, three under a signed head and one after it, with
// bodies and receipts, and returns it with its fleet CA.
func bundleSeed(f *testing.F) ([]byte, *x509.Certificate) {
	f.Helper()
	ca, err := fleet.NewCA("fuzz fleet CA", time.Now())
	if err != nil {
		f.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_fuzz")
	if err != nil {
		f.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		f.Fatal(err)
	}
	l, err := auditlog.Open(filepath.Join(f.TempDir(), "audit"), auditlog.Options{Signer: app})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	var day string
	add := func(i int) {
		r, err := l.Append(context.Background(), auditlog.Event{RequestID: fmt.Sprintf("req_fuzz%d", i), TenantID: "acme", KeyID: "key_1",
			Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200, PromptTokens: 2,
			RequestBody: []byte(`{"model":"builtin/echo"}`), ResponseBody: []byte(fmt.Sprintf("data: %d\n\n", i))})
		if err != nil {
			f.Fatal(err)
		}
		day = r.Day
	}
	for i := range 3 {
		add(i)
	}
	if _, err := l.SignHeads(time.Now()); err != nil {
		f.Fatal(err)
	}
	add(3)
	var buf bytes.Buffer
	if err := bundle.Write(&buf, l, "acme", day, time.Now()); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes(), ca.Cert
}

// FuzzVerifyBundle: `tollgate verify bundle` reads a document of any size
// one event at a time; under arbitrary bytes it never panics and fails
// with a classified kind, and the seed, a real export, verifies.
func FuzzVerifyBundle(f *testing.F) {
	seed, ca := bundleSeed(f)
	if _, err := verify.Bundle(bytes.NewReader(seed), ca); err != nil {
		f.Fatalf("the seed bundle does not verify: %v", err)
	}
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema":"tollgate-audit-bundle/v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := verify.Bundle(bytes.NewReader(data), ca)
		if err == nil {
			return
		}
		if k := verify.KindOf(err); k < verify.Input || k > verify.Incomplete {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
