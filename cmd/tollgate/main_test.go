package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// runDevUntilUp runs `tollgate dev` on data until it has printed its banner
// (and the demo key lines), then stops it and returns what it printed.
func runDevUntilUp(t *testing.T, data string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := newOutputs()
	out, errOut := o.buffer(), o.buffer()
	args := append([]string{"dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--log-level", "error"}, extra...)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, errOut) }()
	marker := "Demo key:" // printed after the banner when there is no seed
	if len(extra) > 0 {
		marker = "Data:"
	}
	deadline := time.After(60 * time.Second)
	for !strings.Contains(out.String(), marker) {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("dev exited %d before it was up: %s%s", code, out.String(), errOut.String())
		case <-deadline:
			cancel()
			t.Fatalf("dev not up after 60s: %s", errOut.String())
		case <-o.changed:
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d: %s", code, errOut.String())
	}
	return out.String()
}

// The demo key is minted and shown once; a restart on the same data says
// when it was shown instead of minting another.
func TestDevDemoKeyShownOnce(t *testing.T) {
	data := t.TempDir()
	first := runDevUntilUp(t, data)
	if !strings.Contains(first, "Demo key:  tgk_") || !strings.Contains(first, "shown this once") {
		t.Fatalf("first start did not show a demo key:\n%s", first)
	}
	second := runDevUntilUp(t, data)
	if strings.Contains(second, "Demo key:  tgk_") || !strings.Contains(second, "was shown once when") {
		t.Fatalf("restart minted or showed a secret again:\n%s", second)
	}
	for _, f := range []string{"fleet-ca.pem", "appliance.pem", "appliance-id"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			t.Errorf("dev did not create %s: %v", f, err)
		}
	}
}

func TestSeedErrorsNameTheLine(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "seed.yaml")
	if err := os.WriteFile(seed, []byte("tenants:\n  - id: acme\n    keys:\n      - label: ci\n        secrett: tgk_dev_acme_ci\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"dev", "--data", t.TempDir(), "--seed", seed}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "line 5") || !strings.Contains(errOut.String(), "secrett") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestSeedRefusedOutsideDev(t *testing.T) {
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"gateway", "--seed", "x.yaml"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "tollgate dev") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut lockedbuf.Buffer
	if code := run(context.Background(), []string{"nope"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
}

func TestServersKeepTheMonitorAwake(t *testing.T) {
	for name, want := range map[string]bool{
		"dev": true, "gateway": true, "central": true,
		"fleet": false, "verify": false, "portal": false, "audit": false, "nosuch": false,
	} {
		if got := isServer(name); got != want {
			t.Errorf("isServer(%q) = %v, want %v", name, got, want)
		}
	}
}
