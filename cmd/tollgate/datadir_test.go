package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/dirlock"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// runGuarded runs a command that is expected to exit by itself, failing the
// test if it has not after a generous guard (instead of hanging the run).
// Its context is cancelled when runGuarded returns.
func runGuarded(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	select {
	case code = <-done:
	case <-time.After(60 * time.Second):
		// Not waited for: a command stuck where ctx does not reach
		// would hang the test binary.
		t.Fatalf("%s still running after 60s; stdout %q, stderr %q", args[0], out.String(), errOut.String())
	}
	return code, out.String(), errOut.String()
}

// Every command with a data directory refuses one another process holds,
// at once and in one line, before it touches any of its stores.
func TestDataDirectoryInUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(data string) []string
	}{
		{"dev", func(data string) []string {
			return []string{"dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0"}
		}},
		{"gateway", func(data string) []string {
			return []string{"gateway", "--data", data, "--etcd-endpoints", "http://127.0.0.1:1", "--policy", filepath.Join(data, "policy"),
				"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0"}
		}},
		{"central", func(data string) []string {
			return []string{"central", "--data", data, "--fleet-ca", filepath.Join(data, "fleet-ca.pem"),
				"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			held, err := dirlock.Acquire(data)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			code, out, errOut := runGuarded(t, tc.args(data))
			want := fmt.Sprintf("tollgate %s: data directory %s is in use by another tollgate process (pid %d)\n", tc.name, data, os.Getpid())
			if code != 1 || errOut != want {
				t.Fatalf("exit %d, stderr %q; want exit 1, stderr %q (stdout %q)", code, errOut, want, out)
			}
			entries, err := os.ReadDir(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != dirlock.FileName {
					t.Errorf("%s created %s in a directory in use", tc.name, e.Name())
				}
			}
		})
	}
}

// A second `tollgate dev` on the data directory of a running one (`make
// run` twice) fails fast instead of waiting forever on the embedded etcd's
// file lock; the first keeps serving and, once stopped, frees the
// directory.
func TestSecondDevOnOneDataDirectory(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := newOutputs()
	out, errOut := o.buffer(), o.buffer()
	args := []string{"dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--log-level", "error"}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, errOut) }()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(out.String(), "Demo key:") {
		select {
		case code := <-done:
			t.Fatalf("first dev exited %d before it was up: %s%s", code, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("first dev not up after 60s: %s", errOut.String())
		case <-o.changed:
		}
	}

	code, _, second := runGuarded(t, args)
	want := fmt.Sprintf("tollgate dev: data directory %s is in use by another tollgate process (pid %d)\n", data, os.Getpid())
	if code != 1 || second != want {
		t.Fatalf("second dev: exit %d, stderr %q; want exit 1, stderr %q", code, second, want)
	}
	select {
	case code := <-done:
		t.Fatalf("first dev exited %d when the second was refused: %s", code, errOut.String())
	default:
	}

	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("first dev exited %d: %s", code, errOut.String())
	}
	if l, err := dirlock.Acquire(data); err != nil {
		t.Fatalf("data directory still locked after dev stopped: %v", err)
	} else {
		_ = l.Close()
	}
}
