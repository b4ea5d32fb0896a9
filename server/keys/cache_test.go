package keys

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

func TestCacheAuthenticates(t *testing.T) {
	cli := etcdtest.Client(t)
	s := NewStore(cli, nil)
	id, secret := mustCreate(t, s, Spec{
		TenantID: "acme", Label: "ci", Models: []string{"builtin/echo"}, RPM: 60, TPD: 1000,
		MaxOutputTokens: 512, Scopes: []string{"tool:get_weather"},
	})
	c := runCache(t, cli, nil)

	p, err := c.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	if p.TenantID != "acme" || p.KeyID != id || p.Label != "ci" || p.RPM != 60 || p.TPD != 1000 || p.MaxOutputTokens != 512 ||
		!p.AllowsModel("builtin/echo") || p.AllowsModel("builtin/other") || !p.HasScope("tool:get_weather") {
		t.Fatalf("principal %+v", p)
	}
	if q, ok := c.Principal("acme", id); !ok || q != p {
		t.Fatalf("Principal(acme, %s) = %v, %v; want the authenticated principal", id, q, ok)
	}
	for _, bad := range []string{"", secret + "x", secret[:len(secret)-1], strings.ToUpper(secret), "tgk_unknown_secret"} {
		if _, err := c.Authenticate(bad); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthorized", bad, err)
		}
	}
}

// Two gateways, each with its own etcd client and cache: a key created and
// then revoked through one reaches the other by the watch.
func TestCacheSeesChangesFromAnotherGateway(t *testing.T) {
	prefix := etcdtest.Prefix(t)
	gw1 := etcdtest.ClientAt(t, etcdtest.Endpoints(t), prefix)
	gw2 := etcdtest.ClientAt(t, etcdtest.Endpoints(t), prefix)
	store1 := NewStore(gw1, nil)
	cache1, cache2 := runCache(t, gw1, nil), runCache(t, gw2, nil)

	id, secret := mustCreate(t, store1, Spec{TenantID: "acme", Label: "ci", AllModels: true})
	start := time.Now()
	await(t, "the other gateway to accept the new key", func() bool { return authenticates(cache2, secret) })
	t.Logf("create reached the other gateway after %v", time.Since(start))

	if _, err := store1.Revoke(context.Background(), "acme", id); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	await(t, "the other gateway to refuse the revoked key", func() bool { return !authenticates(cache2, secret) })
	t.Logf("revocation reached the other gateway after %v", time.Since(start))
	await(t, "the writing gateway to refuse the revoked key", func() bool { return !authenticates(cache1, secret) })
	if _, ok := cache2.Principal("acme", id); ok {
		t.Fatal("Principal returned a revoked key")
	}
}

func TestCacheChecksExpiryAgainstTheClock(t *testing.T) {
	cli := etcdtest.Client(t)
	clock := newFakeClock()
	expire := clock.Now().Add(time.Hour)
	id, secret := mustCreate(t, NewStore(cli, clock.Now), Spec{TenantID: "acme", Label: "ci", ExpireTime: expire})
	c := runCache(t, cli, clock.Now)

	if !authenticates(c, secret) {
		t.Fatal("key refused before it expired")
	}
	clock.Advance(time.Hour - time.Nanosecond)
	if !authenticates(c, secret) {
		t.Fatal("key refused a nanosecond before it expired")
	}
	clock.Advance(time.Nanosecond)
	if _, err := c.Authenticate(secret); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("at its expire time: %v, want ErrUnauthorized", err)
	}
	if _, ok := c.Principal("acme", id); ok {
		t.Fatal("Principal returned an expired key")
	}
}

// The map is keyed by the hash, so a found entry always matches; the final
// constant-time compare must still refuse an entry whose hash differs.
func TestAuthenticateComparesTheStoredHash(t *testing.T) {
	r := newRecord(&Spec{TenantID: "acme", Label: "ci"}, "key_a", "tgk_the_real_secret", time.Now())
	e, err := newEntry(r)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(nil, nil, testLogger(t))
	c.entries = map[string]*entry{"k": e}
	c.publish()
	if !authenticates(c, "tgk_the_real_secret") {
		t.Fatal("real secret refused")
	}
	// Plant the entry under another secret's hash.
	v := buildView(c.entries, c.log)
	v.byHash[HashSecret("tgk_another_secret")] = e
	c.view.Store(v)
	if authenticates(c, "tgk_another_secret") {
		t.Fatal("an entry found under a hash that is not its own authenticated")
	}
	h1, h2 := HashSecret("a"), HashSecret("b")
	if !hashesEqual(&h1, &h1) || hashesEqual(&h1, &h2) {
		t.Fatal("hashesEqual is wrong")
	}
}

// Two keys with one secret: neither authenticates, rather than either.
func TestCacheRefusesASharedSecret(t *testing.T) {
	cli := etcdtest.Client(t)
	s := NewStore(cli, nil)
	a, b := seedSpec(), seedSpec()
	b.Label = "ci-copy"
	mustUpsert(t, s, a)
	mustUpsert(t, s, b)
	c := runCache(t, cli, nil)
	if authenticates(c, a.Secret) {
		t.Fatal("a secret two keys share authenticated")
	}
	b.Secret = "tgk_dev_acme_ci_copy"
	mustUpsert(t, s, b)
	await(t, "both keys to authenticate once their secrets differ", func() bool {
		return authenticates(c, a.Secret) && authenticates(c, b.Secret)
	})
}

func TestCacheDropsDamagedAndDeletedRecords(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	s := NewStore(cli, nil)
	id, secret := mustCreate(t, s, Spec{TenantID: "acme", Label: "ci"})
	_, other := mustCreate(t, s, Spec{TenantID: "acme", Label: "other"})
	c := runCache(t, cli, nil)

	good, err := cli.Get(ctx, recordKey("acme", id))
	if err != nil {
		t.Fatal(err)
	}
	badHash := strings.Replace(string(good.Kvs[0].Value), `"secret_sha256":"`, `"secret_sha256":"zz`, 1)
	for _, damaged := range []string{"{not json", badHash} {
		if _, err := cli.Put(ctx, recordKey("acme", id), string(good.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		await(t, "the intact key", func() bool { return authenticates(c, secret) })
		if _, err := cli.Put(ctx, recordKey("acme", id), damaged); err != nil {
			t.Fatal(err)
		}
		await(t, "the damaged key to be refused", func() bool { return !authenticates(c, secret) })
		if !authenticates(c, other) {
			t.Fatal("a damaged record took another key with it")
		}
	}
	if _, err := cli.Delete(ctx, recordKey("acme", id)); err != nil {
		t.Fatal(err)
	}
	id2, _ := mustCreate(t, s, Spec{TenantID: "acme", Label: "later"})
	await(t, "the later key", func() bool { _, ok := c.Principal("acme", id2); return ok })
	if _, ok := c.view.Load().byRef[keyRef{"acme", id}]; ok {
		t.Fatal("deleted record still cached")
	}
}

// The watch starts after etcd has compacted past it: the cache must reload
// and then see what was written meanwhile.
func TestCacheReloadsAfterCompaction(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	w := watchThrough(cli)
	s := NewStore(cli, nil)
	oldID, oldSecret := mustCreate(t, s, Spec{TenantID: "acme", Label: "old"})

	gate := make(chan struct{})
	w.gate = gate
	c := runCache(t, cli, nil)
	if n := <-w.entered; n != 1 {
		t.Fatalf("watch call %d, want 1", n)
	}
	// The cache has loaded and its first watch is held back: write, then
	// compact away the revisions it would have watched from.
	_, newSecret := mustCreate(t, s, Spec{TenantID: "acme", Label: "new"})
	if _, err := s.Revoke(ctx, "acme", oldID); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, revision(t, cli)); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if n := <-w.entered; n != 2 {
		t.Fatalf("watch call %d, want 2 (after a reload)", n)
	}
	await(t, "the reloaded view", func() bool { return authenticates(c, newSecret) && !authenticates(c, oldSecret) })
}

// A watch that ends (as on a lost connection) is replaced, and changes made
// after it are seen.
func TestCacheRewatchesAfterTheWatchEnds(t *testing.T) {
	cli := etcdtest.Client(t)
	w := watchThrough(cli)
	s := NewStore(cli, nil)
	c := runCache(t, cli, nil)
	<-w.entered
	for round := 2; round <= 4; round++ {
		w.breakWatch()
		if n := <-w.entered; n != round {
			t.Fatalf("watch call %d, want %d", n, round)
		}
		_, secret := mustCreate(t, s, Spec{TenantID: "acme", Label: "round" + string(rune('0'+round))})
		await(t, "a key created after the watch was replaced", func() bool { return authenticates(c, secret) })
	}
}

// etcd goes away (every connection of the gateway's client is cut and new
// ones refused) and comes back. Meanwhile the cache keeps serving its last
// view; afterwards it catches up with what was written during the outage.
func TestCacheSurvivesAnEtcdOutage(t *testing.T) {
	prefix := etcdtest.Prefix(t)
	eps := etcdtest.Endpoints(t)
	p := etcdtest.NewProxy(t)
	gateway := etcdtest.ClientAt(t, p.Endpoints(), prefix)
	admin := NewStore(etcdtest.ClientAt(t, eps, prefix), nil)

	oldID, oldSecret := mustCreate(t, admin, Spec{TenantID: "acme", Label: "old"})
	c := runCache(t, gateway, nil)
	if !authenticates(c, oldSecret) {
		t.Fatal("key refused before the outage")
	}

	p.SetDown(true)
	_, newSecret := mustCreate(t, admin, Spec{TenantID: "acme", Label: "new"})
	if _, err := admin.Revoke(context.Background(), "acme", oldID); err != nil {
		t.Fatal(err)
	}
	if !authenticates(c, oldSecret) || authenticates(c, newSecret) {
		t.Fatal("the cache lost its last view during the outage")
	}

	p.SetDown(false)
	start := time.Now()
	await(t, "the cache to catch up after the outage", func() bool {
		return authenticates(c, newSecret) && !authenticates(c, oldSecret)
	})
	t.Logf("caught up %v after etcd came back", time.Since(start))
}

// The end of a healthy watch starts the backoff afresh, even when the
// watch delivered nothing (a quiet key space): repeated ends of quiet but
// long watches must not stretch the next reload's wait, during which a
// revocation would go unseen. Watches that end at once (etcd flapping)
// still back off.
func TestCacheBackoffAfterQuietWatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lasted   time.Duration // how long each watch runs before it ends
		longest  time.Duration // the longest wait allowed after eight ends
		shortest time.Duration
	}{
		{"long quiet watches", time.Second, 10 * time.Millisecond, 0},
		{"watches that end at once", 0, 200 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := etcdtest.Client(t)
			w := watchThrough(cli)
			clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			waits := make(chan time.Duration, 100)
			c := NewCache(cli, clock.Now, testLogger(t))
			c.minBackoff, c.maxBackoff = 10*time.Millisecond, 200*time.Millisecond
			c.retrying = func(d time.Duration) { waits <- d }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("cache Run returned %v", err)
				}
			}()
			<-w.entered
			var last time.Duration
			for range 8 {
				clock.Advance(tc.lasted)
				w.breakWatch()
				last = <-waits
				<-w.entered
			}
			if last > tc.longest || last < tc.shortest {
				t.Fatalf("the wait after eight ends is %v, want %v to %v", last, tc.shortest, tc.longest)
			}
		})
	}
}
