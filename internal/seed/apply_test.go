package seed

import (
	"context"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

func mustParse(t *testing.T, in string) *Seed {
	t.Helper()
	s, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// state returns every key of tenant acme and etcd's revision.
func state(t *testing.T, cli *clientv3.Client, store *keys.Store) ([]*keysv1.Key, int64) {
	t.Helper()
	ctx := context.Background()
	ks, _, err := store.List(ctx, "acme", keys.MaxPageSize, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return ks, resp.Header.Revision
}

func TestApplyTwiceIsHarmless(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	store := keys.NewStore(cli, nil)
	s := mustParse(t, good)

	if err := s.Apply(ctx, store); err != nil {
		t.Fatal(err)
	}
	first, rev := state(t, cli, store)
	if len(first) != 2 {
		t.Fatalf("%d keys after applying, want 2", len(first))
	}
	if err := mustParse(t, good).Apply(ctx, store); err != nil {
		t.Fatal(err)
	}
	second, rev2 := state(t, cli, store)
	if rev2 != rev {
		t.Fatalf("applying again wrote to etcd: revision %d, was %d", rev2, rev)
	}
	for i := range first {
		if !proto.Equal(first[i], second[i]) {
			t.Fatalf("applying again changed %v to %v", first[i], second[i])
		}
	}
}

func TestApplyBringsKeysInLine(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	store := keys.NewStore(cli, nil)
	if err := mustParse(t, good).Apply(ctx, store); err != nil {
		t.Fatal(err)
	}
	before, err := store.FindByLabel(ctx, "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.NewReplacer("rpm: 600", "rpm: 5", "revoked: false", "revoked: true").Replace(good)
	if err := mustParse(t, changed).Apply(ctx, store); err != nil {
		t.Fatal(err)
	}
	after, err := store.FindByLabel(ctx, "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if after.GetKeyId() != before.GetKeyId() || !proto.Equal(after.GetCreateTime(), before.GetCreateTime()) {
		t.Fatalf("key identity changed: %v -> %v", before, after)
	}
	if after.GetRpm() != 5 || after.GetRevokeTime() == nil {
		t.Fatalf("key not brought in line: %v", after)
	}
}

// The seeded secrets authenticate through a gateway's cache, and the keys
// the seed declares revoked or expired are refused.
func TestAppliedSeedAuthenticates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cli := etcdtest.Client(t)
	if err := mustParse(t, good).Apply(ctx, keys.NewStore(cli, nil)); err != nil {
		t.Fatal(err)
	}
	cache := keys.NewCache(cli, nil, nil)
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cache: %v", err)
		}
	})
	select {
	case <-cache.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	if p, err := cache.Authenticate("tgk_dev_acme_ci"); err != nil || !p.AllModels || p.RPM != 600 {
		t.Fatalf("seeded key: %+v, %v", p, err)
	}
	if _, err := cache.Authenticate("tgk_dev_acme_echo"); !errors.Is(err, keys.ErrUnauthorized) {
		t.Fatalf("seeded revoked and expired key: %v, want ErrUnauthorized", err)
	}
}

func TestApplyReportsTheLine(t *testing.T) {
	s := &Seed{Tenants: []Tenant{{ID: "acme", Keys: []Key{{Label: "x", Secret: "tgk_dev_acme_x", Models: []string{"*"}, ExpiresAt: "tomorrow"}}}}}
	err := s.Apply(context.Background(), keys.NewStore(etcdtest.Client(t), nil))
	if err == nil || !strings.Contains(err.Error(), "seed: tenant acme key \"x\": expires_at") {
		t.Fatalf("Apply of a seed built in code with a bad time: %v", err)
	}
}
