package keys

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// benchCache returns a cache holding n keys, filled without etcd, and the
// secrets of its keys.
func benchCache(b *testing.B, n int) (*Cache, []string) {
	b.Helper()
	c := NewCache(nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.entries = make(map[string]*entry, n)
	secrets := make([]string, n)
	for i := range n {
		secrets[i] = newSecret()
		spec := Spec{TenantID: "acme", Label: fmt.Sprint("k", i), AllModels: true, ExpireTime: time.Now().Add(time.Hour)}
		e, err := newEntry(newRecord(&spec, newKeyID(), secrets[i], time.Now()))
		if err != nil {
			b.Fatal(err)
		}
		c.entries[fmt.Sprint(i)] = e
	}
	c.publish()
	return c, secrets
}

// BenchmarkAuthenticate measures the request hot path: hash the secret,
// look it up, compare, check expiry.
func BenchmarkAuthenticate(b *testing.B) {
	c, secrets := benchCache(b, 10_000)
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := c.Authenticate(secrets[i%len(secrets)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		unknown := newSecret()
		for b.Loop() {
			if _, err := c.Authenticate(unknown); err == nil {
				b.Fatal("unknown secret authenticated")
			}
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := c.Authenticate(secrets[i%len(secrets)]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}
