package keys

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

func seedSpec() UpsertSpec {
	return UpsertSpec{
		Spec: Spec{
			TenantID: "acme", Label: "ci", AllModels: true, RPM: 600, TPD: 1_000_000,
			Scopes: []string{"tool:get_weather"}, ExpireTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		},
		Secret: "tgk_dev_acme_ci",
	}
}

// revision returns etcd's current revision.
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func mustUpsert(t *testing.T, s *Store, u UpsertSpec) *keysv1.Key {
	t.Helper()
	k, err := s.Upsert(context.Background(), u)
	if err != nil {
		t.Fatalf("upsert %+v: %v", u, err)
	}
	return k
}

func TestUpsertTwiceChangesNothing(t *testing.T) {
	clock := newFakeClock()
	cli := etcdtest.Client(t)
	s := NewStore(cli, clock.Now)
	first := mustUpsert(t, s, seedSpec())
	rev := revision(t, cli)
	clock.Advance(time.Hour)
	second := mustUpsert(t, s, seedSpec())
	if !proto.Equal(first, second) {
		t.Fatalf("second upsert %v, first %v", second, first)
	}
	if got := revision(t, cli); got != rev {
		t.Fatalf("second upsert wrote to etcd: revision %d, was %d", got, rev)
	}
	if first.GetSecretHint() != "tgk_dev" { // half of a short declared secret
		t.Errorf("hint %q", first.GetSecretHint())
	}
}

func TestUpsertBringsTheRecordInLine(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewStore(etcdtest.Client(t), clock.Now)
	orig := mustUpsert(t, s, seedSpec())

	clock.Advance(time.Hour)
	u := seedSpec()
	u.AllModels, u.Models = false, []string{"builtin/echo"}
	u.RPM, u.TPD, u.MaxOutputTokens, u.Scopes, u.ExpireTime = 1, 2, 3, nil, time.Time{}
	u.Secret = "tgk_dev_acme_ci_rotated"
	changed := mustUpsert(t, s, u)
	want := &keysv1.Key{
		TenantId: "acme", KeyId: orig.GetKeyId(), Label: "ci", Models: []string{"builtin/echo"},
		Rpm: 1, Tpd: 2, MaxOutputTokens: 3, CreateTime: orig.GetCreateTime(), SecretHint: "tgk_dev_",
	}
	if !proto.Equal(changed, want) {
		t.Fatalf("after upsert %v, want %v", changed, want)
	}
	if got, err := s.Get(ctx, "acme", orig.GetKeyId()); err != nil || !proto.Equal(got, want) {
		t.Fatalf("stored %v %v, want %v", got, err, want)
	}

	// Revoked in the seed: revoked once, and the first time is kept.
	u.Revoked = true
	revokedAt := clock.t
	if k := mustUpsert(t, s, u); !k.GetRevokeTime().AsTime().Equal(revokedAt) {
		t.Fatalf("revoke time %v, want %v", k.GetRevokeTime().AsTime(), revokedAt)
	}
	clock.Advance(time.Hour)
	if k := mustUpsert(t, s, u); !k.GetRevokeTime().AsTime().Equal(revokedAt) {
		t.Fatalf("revoke time moved to %v, want %v", k.GetRevokeTime().AsTime(), revokedAt)
	}
	// Not revoked in the seed: usable again.
	u.Revoked = false
	if k := mustUpsert(t, s, u); k.GetRevokeTime() != nil || k.GetKeyId() != orig.GetKeyId() {
		t.Fatalf("after un-revoking: %v", k)
	}
}

func TestUpsertAdoptsACreatedKey(t *testing.T) {
	s := NewStore(etcdtest.Client(t), nil)
	id, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: "ci"})
	if k := mustUpsert(t, s, seedSpec()); k.GetKeyId() != id {
		t.Fatalf("upsert made key %s, want the existing %s", k.GetKeyId(), id)
	}
	if _, _, err := s.Create(context.Background(), Spec{TenantID: "acme", Label: "ci"}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("create over a seeded label: %v, want ErrAlreadyExists", err)
	}
}

func TestUpsertAcceptsExpiredAndRevokedKeys(t *testing.T) {
	s := NewStore(etcdtest.Client(t), nil)
	u := seedSpec()
	u.ExpireTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	u.Revoked = true
	k := mustUpsert(t, s, u)
	if k.GetRevokeTime() == nil || !k.GetExpireTime().AsTime().Equal(u.ExpireTime) {
		t.Fatalf("upserted %v", k)
	}
}

func TestUpsertRejectsBadSecrets(t *testing.T) {
	s := NewStore(etcdtest.Client(t), nil)
	for _, secret := range []string{"", "tgk_short", "sk_0123456789abcdef"} {
		u := seedSpec()
		u.Secret = secret
		if _, err := s.Upsert(context.Background(), u); !errors.Is(err, ErrInvalid) {
			t.Errorf("secret %q: %v, want ErrInvalid", secret, err)
		}
	}
}

// A label index entry whose record is gone (written by hand, or a record
// deleted without its entry) does not block the label.
func TestUpsertRepairsADanglingLabel(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	if _, err := cli.Put(ctx, labelKey("acme", "ci"), "key_gone"); err != nil {
		t.Fatal(err)
	}
	s := NewStore(cli, nil)
	k := mustUpsert(t, s, seedSpec())
	if k.GetKeyId() == "key_gone" {
		t.Fatal("upsert reused the dangling key id")
	}
	if got, err := s.FindByLabel(ctx, "acme", "ci"); err != nil || got.GetKeyId() != k.GetKeyId() {
		t.Fatalf("FindByLabel = %v, %v", got, err)
	}
}
