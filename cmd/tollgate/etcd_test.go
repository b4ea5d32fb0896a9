package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
	"github.com/tollgate-dev/tollgate/portal"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// TestEtcdFlags: the TLS flags go with https:// endpoints only, the
// client certificate and its key together, and a file that cannot be
// used is named; nothing is dialled before the flags are right.
func TestEtcdFlags(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tlsEP = "https://127.0.0.1:1"
	for _, c := range []struct {
		name string
		f    etcdFlags
		want string // "" means accepted
		tls  bool
	}{
		{"none", etcdFlags{}, "", false},
		{"plain", etcdFlags{endpoints: "http://127.0.0.1:1, http://127.0.0.2:1"}, "", false},
		{"tls, system roots", etcdFlags{endpoints: tlsEP}, "", true},
		{"tls flags without endpoints", etcdFlags{ca: notPEM}, "need --etcd-endpoints", false},
		{"tls flags with http endpoints", etcdFlags{endpoints: "http://127.0.0.1:1", ca: notPEM}, "are for https:// endpoints", false},
		{"tls flags with host:port endpoints", etcdFlags{endpoints: "127.0.0.1:1", cert: notPEM, key: notPEM}, "are for https:// endpoints", false},
		{"host:port, as etcd's client takes it", etcdFlags{endpoints: "127.0.0.1:2379"}, "", false},
		{"unix socket", etcdFlags{endpoints: "unix://etcd.sock"}, "", false},
		{"mixed schemes", etcdFlags{endpoints: tlsEP + ",http://127.0.0.1:2"}, "mixes URLs with and without TLS", false},
		{"mixed, host:port", etcdFlags{endpoints: tlsEP + ",127.0.0.1:2"}, "mixes URLs with and without TLS", false},
		{"another scheme", etcdFlags{endpoints: "grpc://127.0.0.1:2379"}, `"grpc://127.0.0.1:2379" is not an http://, https:// or unix:// URL`, false},
		{"cert without key", etcdFlags{endpoints: tlsEP, cert: notPEM}, "--etcd-cert and --etcd-key go together", false},
		{"key without cert", etcdFlags{endpoints: tlsEP, key: notPEM}, "--etcd-cert and --etcd-key go together", false},
		{"ca not PEM", etcdFlags{endpoints: tlsEP, ca: notPEM}, "not.pem holds no PEM certificate", false},
		{"ca missing", etcdFlags{endpoints: tlsEP, ca: filepath.Join(dir, "none.pem")}, "none.pem", false},
		{"cert not PEM", etcdFlags{endpoints: tlsEP, cert: notPEM, key: notPEM}, "--etcd-cert, --etcd-key", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := c.f.tlsConfig()
			if c.want == "" {
				if err != nil || (cfg != nil) != c.tls {
					t.Fatalf("tlsConfig = %v, %v; want TLS %t", cfg, err, c.tls)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("tlsConfig error %v, want one containing %q", err, c.want)
			}
		})
	}
	// The commands check them before dialling, or reading a password:
	// flags that do not go together are a usage error (2), a file that
	// cannot be used an error (1).
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"gateway", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-ca", notPEM, "--data", dir, "--policy", "../../examples/policy"},
			2, "are for https:// endpoints"},
		{[]string{"gateway", "--etcd-endpoints", tlsEP, "--etcd-ca", notPEM, "--data", dir, "--policy", "../../examples/policy"},
			1, "holds no PEM certificate"},
		{[]string{"dev", "--etcd-cert", notPEM, "--data", filepath.Join(dir, "dev")}, 2, "need --etcd-endpoints"},
		{[]string{"portal", "add-admin", "--etcd-endpoints", tlsEP, "--etcd-key", notPEM, "--tenant", "acme", "--user", "alice",
			"--password-file", filepath.Join(dir, "no-password")}, 2, "--etcd-cert and --etcd-key go together"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dev")); err == nil {
		t.Error("dev made its data directory before refusing its flags")
	}
}

// TestEtcdOverTLS: the gateway and `tollgate portal` reach an etcd that
// serves TLS and asks for client certificates, as a production cluster
// does: the gateway authenticates a key stored there and answers.
func TestEtcdOverTLS(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	_, secret, err := keys.NewStore(srv.NewClient(t), nil).Create(context.Background(), keys.Spec{TenantID: "acme", Label: "tls", AllModels: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := portal.NewAdmins(srv.NewClient(t), nil).Create(context.Background(), "acme", "alice", "a long enough password 1"); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--etcd-endpoints", strings.Join(srv.Endpoints, ","), "--etcd-ca", srv.CA, "--etcd-cert", srv.Cert, "--etcd-key", srv.Key}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), append([]string{"portal", "list-admins"}, tlsArgs...), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "acme\talice") {
		t.Fatalf("portal list-admins over TLS: exit %d, %q %s", code, out.String(), errOut.String())
	}

	_, appDir := issueAppliance(t, t.TempDir(), "app_etcdtls")
	g := startCommand(t, newOutputs(), append([]string{"gateway", "--data", appDir, "--policy", "../../examples/policy",
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, tlsArgs...)...)
	base := g.match(t, `Base URL:\s+(http://\S+)/v1`)
	webtest.Chat(t, base, secret, "hello over TLS")
}
