package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/testpki"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// unit is a systemd unit file's settings by Section.Key, continuation
// lines joined.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	var line, section string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		part := strings.TrimSpace(sc.Text())
		if line == "" && strings.HasPrefix(part, "[") {
			section = strings.Trim(part, "[]")
			continue
		}
		if line == "" && (part == "" || strings.HasPrefix(part, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(part, `\`); ok {
			line += rest + " "
			continue
		}
		line += part
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not key=value", path, line)
		}
		u[section+"."+key] = append(u[section+"."+key], value)
		line = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("%s= given %d times, want once", key, len(u[key]))
	}
	return u[key][0]
}

// execArgs is ExecStart's command split into words: the binary, then the
// tollgate arguments with each flag's value substituted by swap (a value
// swap does not name is kept).
func (u unit) execArgs(t *testing.T, swap map[string]string) (bin string, args []string) {
	t.Helper()
	line := u.one(t, "Service.ExecStart")
	if strings.ContainsAny(line, `"'$%`) {
		t.Fatalf("ExecStart %q quotes or expands: keep it to plain words", line)
	}
	words := strings.Fields(line)
	for i := 1; i < len(words); i++ {
		w := words[i]
		if v, ok := swap[w]; ok && i+1 < len(words) && strings.HasPrefix(w, "--") {
			args = append(args, w, v)
			i++
			continue
		}
		args = append(args, w)
	}
	return words[0], args
}

// flagValue is the value ExecStart gives a flag.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestSystemdUnits: the example units in examples/systemd restart on
// failure but not on a flag error, give a stop time above the drain, may
// write where their ExecStart writes, and start: each ExecStart runs with
// its paths and addresses swapped for the test's, against a TLS etcd (the
// gateway) and PostgreSQL (the central plane), and answers. With
// systemd-analyze on the machine, systemd checks their syntax too.
func TestSystemdUnits(t *testing.T) {
	const dir = "../../examples/systemd"
	gw := readUnit(t, filepath.Join(dir, "tollgate-gateway.service"))
	central := readUnit(t, filepath.Join(dir, "tollgate-central.service"))
	for name, u := range map[string]unit{"gateway": gw, "central": central} {
		for key, want := range map[string]string{"Service.Restart": "on-failure", "Service.RestartPreventExitStatus": "2",
			"Service.KillSignal": "SIGTERM", "Service.ProtectSystem": "strict", "Service.NoNewPrivileges": "yes"} {
			if got := u.one(t, key); got != want {
				t.Errorf("%s: %s=%s, want %s", name, key, got, want)
			}
		}
		stop, err := time.ParseDuration(u.one(t, "Service.TimeoutStopSec"))
		if err != nil {
			t.Fatal(err)
		}
		// The start limit must be reachable: a window longer than the
		// burst of restarts takes, or a unit that keeps failing restarts
		// for ever.
		restart, err1 := time.ParseDuration(u.one(t, "Service.RestartSec"))
		window, err2 := time.ParseDuration(u.one(t, "Unit.StartLimitIntervalSec") + "s")
		burst, err3 := strconv.Atoi(u.one(t, "Unit.StartLimitBurst"))
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if time.Duration(burst)*restart >= window {
			t.Errorf("%s: %d restarts %s apart never fit in StartLimitIntervalSec=%s", name, burst, restart, window)
		}
		bin, args := u.execArgs(t, nil)
		grace, err := time.ParseDuration(flagValue(args, "--shutdown-grace"))
		if err != nil || bin != "/usr/local/bin/tollgate" || args[0] != name {
			t.Fatalf("%s: ExecStart %s %v", name, bin, args)
		}
		// The drain, then what is left is ended and the stores closed.
		if stop < grace+10*time.Second {
			t.Errorf("%s: TimeoutStopSec=%s leaves less than 10s past --shutdown-grace %s", name, stop, grace)
		}
		// ProtectSystem=strict: every directory written must be the state
		// directory or listed.
		writable := append([]string{"/var/lib/" + u.one(t, "Service.StateDirectory")}, strings.Fields(strings.Join(u["Service.ReadWritePaths"], " "))...)
		for _, f := range []string{"--data", "--audit-journal-dir"} {
			if d := flagValue(args, f); d != "" && !containsPath(writable, d) {
				t.Errorf("%s: %s %s is not writable under ProtectSystem=strict (%v)", name, f, d, writable)
			}
		}
	}

	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		verifyUnits(t, analyze, dir)
	} else {
		t.Log("systemd-analyze not installed: unit syntax not checked by systemd")
	}

	tmp := t.TempDir()
	pki, appDir := issueAppliance(t, tmp, "app_systemd")
	certFile, keyFile, pool := writeSelfSigned(t)
	etcd := etcdtest.StartTLS(t)
	_, secret, err := keys.NewStore(etcd.NewClient(t), nil).Create(context.Background(), keys.Spec{TenantID: "acme", Label: "systemd", AllModels: true})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("central", func(t *testing.T) {
		dsn, schema := postgresSchema(t)
		tokens := filepath.Join(tmp, "audit-tokens.yaml")
		if err := os.WriteFile(tokens, []byte("acme: [\"tga_systemd_test\"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, args := central.execArgs(t, map[string]string{
			"--fleet-ca": filepath.Join(pki, fleet.CACertFile), "--audit-tokens": tokens, "--data": filepath.Join(tmp, "central"),
			"--postgres": dsn, "--ingest-addr": "127.0.0.1:0", "--rest-addr": "127.0.0.1:0", "--grpc-addr": "127.0.0.1:0",
			"--metrics-addr": "127.0.0.1:0", "--rest-tls-cert": certFile, "--rest-tls-key": keyFile,
		})
		c := startCommand(t, newOutputs(), append(args, "--postgres-schema", schema)...)
		rest := c.match(t, `REST:\s+(https://[^/\s]+)/v1/`)
		transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		t.Cleanup(transport.CloseIdleConnections)
		resp, err := (&http.Client{Transport: transport}).Get(rest + "/v1/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("openapi.json: %d", resp.StatusCode)
		}
	})
	t.Run("gateway", func(t *testing.T) {
		grpcPKI := newGRPCPKI(t)
		tokens := filepath.Join(tmp, "gateway-audit-tokens.yaml")
		if err := os.WriteFile(tokens, []byte("acme: [\"tga_systemd_gateway\"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, args := gw.execArgs(t, map[string]string{
			"--etcd-endpoints": strings.Join(etcd.Endpoints, ","), "--etcd-ca": etcd.CA, "--etcd-cert": etcd.Cert, "--etcd-key": etcd.Key,
			"--data": appDir, "--audit-journal-dir": filepath.Join(tmp, "journal", "tollgate"), "--policy": "../../examples/policy",
			"--gateway-addr": "127.0.0.1:0", "--gateway-tls-cert": certFile, "--gateway-tls-key": keyFile,
			"--grpc-addr": "127.0.0.1:0", "--grpc-tls-cert": grpcPKI.certFile, "--grpc-tls-key": grpcPKI.keyFile,
			"--grpc-client-ca": grpcPKI.caFile, "--audit-tokens": tokens, "--metrics-addr": "127.0.0.1:0",
			// Unreachable: heads queue on disk, as while the plane is down.
			"--central-ingest": "127.0.0.1:1", "--central-ca": filepath.Join(pki, fleet.CACertFile),
		})
		g := startCommand(t, newOutputs(), args...)
		base := g.match(t, `Base URL:\s+(https://\S+)/v1`)
		chatOverTLS(t, base+"/v1", secret, "hello from the unit", pool)
		// The operator of the unit manages keys over gRPC; the audit
		// token reads its tenant's trail.
		grpcAddr := g.match(t, `gRPC:\s+(\S+) \(TLS\)`)
		op := grpcPKI.ca.Client(t, testpki.Names{CommonName: flagValue(args, "--grpc-operator")})
		if _, err := keysv1.NewKeysServiceClient(dialTLS(t, grpcAddr, grpcPKI.ca, &op)).ListKeys(context.Background(),
			&keysv1.ListKeysRequest{TenantId: "acme"}); err != nil {
			t.Errorf("ListKeys as the unit's operator: %v", err)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tga_systemd_gateway")
		if _, err := auditv1.NewAuditServiceClient(dialTLS(t, grpcAddr, grpcPKI.ca, nil)).ListHeads(ctx,
			&auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01"}); err != nil {
			t.Errorf("ListHeads with the tenant's audit token: %v", err)
		}
	})
}

func containsPath(dirs []string, path string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// verifyUnits runs systemd-analyze verify on copies of the units whose
// ExecStart names an executable that exists here and whose environment
// file may be missing.
func verifyUnits(t *testing.T, analyze, dir string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var paths []string
	for _, name := range []string{"tollgate-gateway.service", "tollgate-central.service"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(raw), "/usr/local/bin/tollgate", exe)
		s = strings.ReplaceAll(s, "EnvironmentFile=/", "EnvironmentFile=-/")
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
