package keys

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
)

// serve runs the KeysService on a real gRPC server (with the shared
// interceptors) on a loopback port and returns a client of it.
func serve(t *testing.T) (keysv1.KeysServiceClient, *Store) {
	t.Helper()
	cli := etcdtest.Client(t)
	store := NewStore(cli, nil)
	cache := runCache(t, cli, nil)
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		keysv1.RegisterKeysServiceServer(s, NewService(store, cache, testLogger(t)))
	})
	return keysv1.NewKeysServiceClient(conn), store
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

func TestServiceRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, _ := serve(t)

	created, err := c.CreateKey(ctx, &keysv1.CreateKeyRequest{
		TenantId: "acme", Label: "ci", Models: []string{"builtin/echo"}, Rpm: 60, Tpd: 1000,
		MaxOutputTokens: 512, Scopes: []string{"tool:get_weather"},
	})
	if err != nil {
		t.Fatal(err)
	}
	k, secret := created.GetKey(), created.GetSecret()
	if k.GetMaxOutputTokens() != 512 {
		t.Fatalf("created key's max_output_tokens %d, want 512", k.GetMaxOutputTokens())
	}
	got, err := c.GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "acme", KeyId: k.GetKeyId()})
	if err != nil || !proto.Equal(got.GetKey(), k) {
		t.Fatalf("GetKey = %v, %v; want %v", got, err, k)
	}
	list, err := c.ListKeys(ctx, &keysv1.ListKeysRequest{TenantId: "acme"})
	if err != nil || len(list.GetKeys()) != 1 || !proto.Equal(list.GetKeys()[0], k) || list.GetNextPageToken() != "" {
		t.Fatalf("ListKeys = %v, %v", list, err)
	}

	var authed *keysv1.AuthenticateKeyResponse
	await(t, "AuthenticateKey to accept the new key", func() bool {
		authed, err = c.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: secret})
		return err == nil
	})
	if !proto.Equal(authed.GetKey(), k) {
		t.Fatalf("AuthenticateKey = %v, want %v", authed.GetKey(), k)
	}

	revoked, err := c.RevokeKey(ctx, &keysv1.RevokeKeyRequest{TenantId: "acme", KeyId: k.GetKeyId()})
	if err != nil || revoked.GetKey().GetRevokeTime() == nil {
		t.Fatalf("RevokeKey = %v, %v", revoked, err)
	}
	again, err := c.RevokeKey(ctx, &keysv1.RevokeKeyRequest{TenantId: "acme", KeyId: k.GetKeyId()})
	if err != nil || !proto.Equal(again.GetKey(), revoked.GetKey()) {
		t.Fatalf("second RevokeKey = %v, %v; want %v", again, err, revoked)
	}
	var revokedErr error
	await(t, "AuthenticateKey to refuse the revoked key", func() bool {
		_, revokedErr = c.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: secret})
		return revokedErr != nil
	})
	wantCode(t, "revoked key", revokedErr, codes.Unauthenticated)
	_, unknownErr := c.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: "tgk_unknown_secret"})
	wantCode(t, "unknown key", unknownErr, codes.Unauthenticated)
	if status.Convert(revokedErr).Message() != status.Convert(unknownErr).Message() {
		t.Fatalf("revoked and unknown keys are told apart: %q vs %q", status.Convert(revokedErr).Message(), status.Convert(unknownErr).Message())
	}
}

func TestServiceErrors(t *testing.T) {
	ctx := context.Background()
	c, store := serve(t)
	id, _ := mustCreate(t, store, Spec{TenantID: "acme", Label: "ci"})

	// Rejected by the protovalidate interceptor before the handler runs.
	_, err := c.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "Not A Tenant", Label: "x"})
	wantCode(t, "CreateKey with a bad tenant id", err, codes.InvalidArgument)
	_, err = c.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: "x", AllModels: true, Models: []string{"builtin/echo"}})
	wantCode(t, "CreateKey with all models and a list", err, codes.InvalidArgument)
	for _, n := range []int64{-1, MaxOutputTokens + 1} {
		_, err = c.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: "x", MaxOutputTokens: n})
		wantCode(t, fmt.Sprintf("CreateKey with max_output_tokens %d", n), err, codes.InvalidArgument)
	}
	_, err = c.GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "acme", KeyId: "nokey"})
	wantCode(t, "GetKey with a bad key id", err, codes.InvalidArgument)
	_, err = c.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{})
	wantCode(t, "AuthenticateKey without a secret", err, codes.InvalidArgument)
	// The earliest timestamp is Go's zero time, which a key reads as
	// "never expires": refused, not a key that never expires.
	_, err = c.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: "x", ExpireTime: &timestamppb.Timestamp{Seconds: -62135596800}})
	wantCode(t, "CreateKey expiring in year 1", err, codes.InvalidArgument)
	// Rejected by the store.
	_, err = c.ListKeys(ctx, &keysv1.ListKeysRequest{TenantId: "acme", PageToken: "not-a-token"})
	wantCode(t, "ListKeys with a forged page token", err, codes.InvalidArgument)

	_, err = c.GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "acme", KeyId: "key_nosuchkey"})
	wantCode(t, "GetKey of a missing key", err, codes.NotFound)
	_, err = c.GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "other", KeyId: id})
	wantCode(t, "GetKey of another tenant's key", err, codes.NotFound)
	_, err = c.RevokeKey(ctx, &keysv1.RevokeKeyRequest{TenantId: "acme", KeyId: "key_nosuchkey"})
	wantCode(t, "RevokeKey of a missing key", err, codes.NotFound)

	_, err = c.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: "ci"})
	wantCode(t, "CreateKey with a taken label", err, codes.AlreadyExists)

	// A damaged record is an internal error whose detail stays in the log.
	if _, err := store.cli.Put(ctx, recordKey("acme", id), "{damaged"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetKey(ctx, &keysv1.GetKeyRequest{TenantId: "acme", KeyId: id})
	wantCode(t, "GetKey of a damaged record", err, codes.Internal)
	if msg := status.Convert(err).Message(); msg != "internal error" {
		t.Fatalf("internal error message %q leaks detail", msg)
	}
}
