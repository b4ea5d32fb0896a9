package etcdtest

import (
	"context"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestClientsAreIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := Client(t), Client(t)
	if _, err := a.Put(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	resp, err := b.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("client b sees client a's key: %q", resp.Kvs[0].Value)
	}
	resp, err = a.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("client a lost its key: %v %v", resp, err)
	}
}
