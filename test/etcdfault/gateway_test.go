package etcdfault_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/testpki"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

// gateway is a running `tollgate gateway`.
type gateway struct {
	base string // http://host:port/v1
	keys keysv1.KeysServiceClient
	log  string // its stderr
}

// startGateways starts n `tollgate gateway` processes against endpoints,
// each with an appliance certificate of one fleet CA and a gRPC listener
// over TLS whose operator is the returned client certificate's holder.
func startGateways(t *testing.T, n int, endpoints []string) []*gateway {
	t.Helper()
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	tollgate(t, "fleet", "init-ca", "--dir", pki)
	site := testpki.NewCA(t, "site CA")
	grpcCert, grpcKey, caFile := filepath.Join(dir, "grpc.pem"), filepath.Join(dir, "grpc-key.pem"), filepath.Join(dir, "ca.pem")
	site.WriteServer(t, grpcCert, grpcKey)
	site.WriteCA(t, caFile)
	op := site.Client(t, testpki.Names{CommonName: "ops"})

	var gws []*gateway
	for i := range n {
		data := filepath.Join(dir, fmt.Sprintf("gw%d", i+1))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		tollgate(t, "fleet", "issue", "--appliance", fmt.Sprintf("app_etcdfault%d", i+1), "--ca-dir", pki, "--out", data)
		logFile := data + ".log"
		logf, err := os.Create(logFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "gateway", "--etcd-endpoints", strings.Join(endpoints, ","), "--data", data,
			"--policy", "../../examples/policy", "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
			"--grpc-tls-cert", grpcCert, "--grpc-tls-key", grpcKey, "--grpc-client-ca", caFile, "--grpc-operator", "ops",
			"--log-level", "warn")
		cmd.Stderr = logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = logf.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			// SIGTERM drains and returns the slices; a gateway that does
			// not stop in time is killed.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			if t.Failed() {
				if b, _ := os.ReadFile(logFile); len(b) > 0 {
					t.Logf("gateway %d's log (last 4 KiB): %s", i+1, tail(b, 4096))
				}
			}
		})
		addrs, err := tollgatetest.Banner(stdout, "Base URL", "gRPC")
		if err != nil {
			b, _ := os.ReadFile(logFile)
			t.Fatalf("tollgate gateway %d: %v\n%s", i+1, err, b)
		}
		conn, err := grpc.NewClient(strings.TrimSuffix(addrs["gRPC"], " (TLS)"), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: site.Pool(), Certificates: []tls.Certificate{op}, MinVersion: tls.VersionTLS12,
		})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		gws = append(gws, &gateway{base: addrs["Base URL"], keys: keysv1.NewKeysServiceClient(conn), log: logFile})
	}
	return gws
}

// createKey creates a key of tenant acme through KeysService on the first
// gateway, and waits until every gateway's key cache has it.
func createKey(t *testing.T, gws []*gateway, label string, rpm, tpd int64) string {
	t.Helper()
	ctx := context.Background()
	created, err := gws[0].keys.CreateKey(ctx, &keysv1.CreateKeyRequest{TenantId: "acme", Label: label, AllModels: true, Rpm: rpm, Tpd: tpd})
	if err != nil {
		t.Fatalf("CreateKey %s: %v", label, err)
	}
	for i, g := range gws {
		poll(t, fmt.Sprintf("key %s in gateway %d's cache", label, i+1), 10*time.Second, func() bool {
			_, err := g.keys.AuthenticateKey(ctx, &keysv1.AuthenticateKeyRequest{Secret: created.GetSecret()})
			return err == nil
		})
	}
	return created.GetSecret()
}

// tollgate runs a short tollgate command and fails the test if it fails.
func tollgate(t *testing.T, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("tollgate %v: %v\n%s", args, err, out.String())
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
