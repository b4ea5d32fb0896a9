package keys

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

func TestCreateAndGet(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewStore(etcdtest.Client(t), clock.Now)
	expire := clock.Now().Add(24 * time.Hour)
	k, secret, err := s.Create(ctx, Spec{
		TenantID: "acme", Label: "ci", Models: []string{"builtin/echo", "builtin/embed"},
		RPM: 60, TPD: 1000, MaxOutputTokens: 2048, Scopes: []string{"tool:get_weather"}, ExpireTime: expire,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, SecretPrefix) || len(secret) != len(SecretPrefix)+43 {
		t.Errorf("secret %q: want %s and 43 characters", secret, SecretPrefix)
	}
	if !ids.ValidKey(k.GetKeyId()) {
		t.Errorf("key id %q is not valid", k.GetKeyId())
	}
	want := &keysv1.Key{
		TenantId: "acme", KeyId: k.GetKeyId(), Label: "ci", Models: []string{"builtin/echo", "builtin/embed"},
		Rpm: 60, Tpd: 1000, MaxOutputTokens: 2048, Scopes: []string{"tool:get_weather"}, SecretHint: secret[:8],
	}
	want.CreateTime, want.ExpireTime = k.GetCreateTime(), k.GetExpireTime()
	if !proto.Equal(k, want) {
		t.Errorf("created %v, want %v", k, want)
	}
	if !k.GetCreateTime().AsTime().Equal(clock.t) || !k.GetExpireTime().AsTime().Equal(expire) {
		t.Errorf("times %v %v, want create %v expire %v", k.GetCreateTime().AsTime(), k.GetExpireTime().AsTime(), clock.t, expire)
	}
	got, err := s.Get(ctx, "acme", k.GetKeyId())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, k) {
		t.Errorf("Get = %v, want %v", got, k)
	}
	byLabel, err := s.FindByLabel(ctx, "acme", "ci")
	if err != nil || !proto.Equal(byLabel, k) {
		t.Errorf("FindByLabel = %v, %v; want %v", byLabel, err, k)
	}
}

func TestStoredRecordHoldsOnlyTheHash(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	k, secret, err := NewStore(cli, nil).Create(ctx, Spec{TenantID: "acme", Label: "x", AllModels: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, recordKey("acme", k.GetKeyId()))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("record: %v %v", resp, err)
	}
	raw := string(resp.Kvs[0].Value)
	if strings.Contains(raw, secret) || strings.Contains(raw, secret[8:]) {
		t.Fatalf("record %s holds the secret", raw)
	}
	r, err := decodeRecord(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.secretHash()
	if h != HashSecret(secret) {
		t.Fatal("stored hash is not the SHA-256 of the secret")
	}
	for _, field := range []string{`"create_time":"`, `"secret_sha256":"`, `"secret_hint":"tgk_`} {
		if !strings.Contains(raw, field) {
			t.Errorf("record %s lacks %s", raw, field)
		}
	}
	// No maximum a reply is left out, so that a record reads the same to
	// a gateway that predates the field.
	if strings.Contains(raw, "max_output_tokens") {
		t.Errorf("record %s names max_output_tokens, which is 0", raw)
	}
}

func TestCreateLabelIsUniquePerTenant(t *testing.T) {
	ctx := context.Background()
	s := NewStore(etcdtest.Client(t), nil)
	mustCreate(t, s, Spec{TenantID: "acme", Label: "ci", AllModels: true})
	_, _, err := s.Create(ctx, Spec{TenantID: "acme", Label: "ci"})
	if !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second key labelled ci: %v, want ErrAlreadyExists", err)
	}
	mustCreate(t, s, Spec{TenantID: "other", Label: "ci"})
}

func TestCreateRejectsInvalidSpecs(t *testing.T) {
	s := NewStore(etcdtest.Client(t), nil)
	ok := Spec{TenantID: "acme", Label: "ci"}
	for name, mutate := range map[string]func(*Spec){
		"tenant upper case":         func(s *Spec) { s.TenantID = "Acme" },
		"tenant with slash":         func(s *Spec) { s.TenantID = "acme/x" },
		"tenant empty":              func(s *Spec) { s.TenantID = "" },
		"label empty":               func(s *Spec) { s.Label = "" },
		"label too long":            func(s *Spec) { s.Label = strings.Repeat("é", 129) },
		"all and list":              func(s *Spec) { s.AllModels, s.Models = true, []string{"builtin/echo"} },
		"model without slash":       func(s *Spec) { s.Models = []string{"echo"} },
		"negative rpm":              func(s *Spec) { s.RPM = -1 },
		"negative tpd":              func(s *Spec) { s.TPD = -1 },
		"rpm above the most":        func(s *Spec) { s.RPM = MaxRPM + 1 },
		"tpd above the most":        func(s *Spec) { s.TPD = MaxTPD + 1 },
		"negative max output":       func(s *Spec) { s.MaxOutputTokens = -1 },
		"max output above the most": func(s *Spec) { s.MaxOutputTokens = MaxOutputTokens + 1 },
		"scope not a tool":          func(s *Spec) { s.Scopes = []string{"admin"} },
		"scope empty name":          func(s *Spec) { s.Scopes = []string{"tool:"} },
	} {
		t.Run(name, func(t *testing.T) {
			spec := ok
			mutate(&spec)
			if _, _, err := s.Create(context.Background(), spec); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Create(%+v) = %v, want ErrInvalid", spec, err)
			}
		})
	}
}

func TestGetNotFound(t *testing.T) {
	ctx := context.Background()
	s := NewStore(etcdtest.Client(t), nil)
	id, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: "ci"})
	for _, c := range []struct{ tenant, key string }{
		{"acme", "key_nosuchkey"},
		{"other", id}, // another tenant's key is not found
		{"acme/x", "key_a"},
		{"acme", "../" + id},
	} {
		if _, err := s.Get(ctx, c.tenant, c.key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q, %q) = %v, want ErrNotFound", c.tenant, c.key, err)
		}
	}
	if _, err := s.FindByLabel(ctx, "acme", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindByLabel(nope) = %v, want ErrNotFound", err)
	}
}

func TestListPages(t *testing.T) {
	ctx := context.Background()
	s := NewStore(etcdtest.Client(t), nil)
	var ids []string
	for _, l := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		id, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: l})
		ids = append(ids, id)
	}
	mustCreate(t, s, Spec{TenantID: "acme2", Label: "other tenant"})
	slices.Sort(ids)

	var got []string
	token, pages := "", 0
	for {
		page, next, err := s.List(ctx, "acme", 3, token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 3 {
			t.Fatalf("page of %d keys, asked for 3", len(page))
		}
		for _, k := range page {
			got = append(got, k.GetKeyId())
		}
		if next == "" {
			break
		}
		token = next
	}
	if pages != 3 || !slices.Equal(got, ids) {
		t.Fatalf("%d pages %v, want 3 pages %v", pages, got, ids)
	}

	all, next, err := s.List(ctx, "acme", 0, "")
	if err != nil || len(all) != len(ids) || next != "" {
		t.Fatalf("List with default size: %d keys, next %q, err %v", len(all), next, err)
	}
	if none, next, err := s.List(ctx, "nobody", 10, ""); err != nil || len(none) != 0 || next != "" {
		t.Fatalf("List of a tenant without keys: %v %q %v", none, next, err)
	}
	for _, bad := range []string{"!!!", "a2V5Xw", "bm90IGEga2V5"} { // not base64; "key_"; "not a key"
		if _, _, err := s.List(ctx, "acme", 3, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("List with token %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, _, err := s.List(ctx, "acme", -1, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("List with page size -1: %v, want ErrInvalid", err)
	}
}

func TestRevokeIsIdempotent(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewStore(etcdtest.Client(t), clock.Now)
	id, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: "ci"})
	clock.Advance(time.Hour)
	first, err := s.Revoke(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if !first.GetRevokeTime().AsTime().Equal(clock.t) {
		t.Fatalf("revoke time %v, want %v", first.GetRevokeTime().AsTime(), clock.t)
	}
	clock.Advance(time.Hour)
	again, err := s.Revoke(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(again, first) {
		t.Fatalf("second revoke changed the key: %v, was %v", again, first)
	}
	if _, err := s.Revoke(ctx, "acme", "key_nosuchkey"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke of a missing key: %v, want ErrNotFound", err)
	}
}

// Concurrent revokers must agree on one revoke time: without the
// mod-revision guard a later writer would overwrite the first time.
func TestConcurrentRevokesKeepTheFirstTime(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	clock.tick = time.Second // every reading is a different time
	s := NewStore(etcdtest.Client(t), clock.Now)
	id, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: "ci"})

	const n = 8
	got := make([]*keysv1.Key, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := s.Revoke(ctx, "acme", id)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		})
	}
	wg.Wait()
	stored, err := s.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range got {
		if !proto.Equal(k, stored) {
			t.Errorf("revoker %d saw %v, stored %v", i, k.GetRevokeTime().AsTime(), stored.GetRevokeTime().AsTime())
		}
	}
}
