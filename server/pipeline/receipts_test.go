package pipeline_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/receipt"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// TestServiceReceiptMetadata: a unary call's receipt comes in its header
// metadata, a stream's in its trailer metadata, each a verifying receipt
// of the call's event.
func TestServiceReceiptMetadata(t *testing.T) {
	ca, err := fleet.NewCA("test fleet CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_grpc")
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
	defer func() { _ = l.Close() }()
	engines, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(engines)
	p := pipeline.New(pipeline.Config{Inference: local, Audit: l, Receipts: l,
		Auth: oneKey{keys.NewPrincipal("acme", "key_test", "test", true, nil, 0, 0, nil, time.Time{})}})
	cli := serveService(t, p, 4)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tgk_test")

	check := func(name string, md metadata.MD) {
		t.Helper()
		v := md.Get(pipeline.ReceiptHeader)
		if len(v) != 1 {
			t.Fatalf("%s: %d x-tollgate-receipt values in %v", name, len(v), md)
		}
		doc, err := base64.RawURLEncoding.DecodeString(v[0])
		if err != nil {
			t.Fatal(err)
		}
		var r receipt.Receipt
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if err := receipt.Verify(r, ca.Cert); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec, err := l.Event(r.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Leaf.Endpoint != "/tollgate.inference.v1.InferenceService/"+name || r.TenantID != "acme" {
			t.Fatalf("%s: the receipt is of a %s event of %s", name, rec.Leaf.Endpoint, r.TenantID)
		}
	}

	var header metadata.MD
	if _, err := cli.ListModels(ctx, &inferencev1.ListModelsRequest{}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	check("ListModels", header)

	stream, err := cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel,
		Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	check("ChatCompletion", stream.Trailer())
}
