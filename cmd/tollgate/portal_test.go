package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/webtest"
	"github.com/tollgate-dev/tollgate/portal"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// formClient is a browser-like client: cookies kept, redirects followed,
// forms posted with the portal's own Origin.
type formClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (f *formClient) send(method, path string, form url.Values) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		f.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.base)
	}
	resp, err := f.c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestDevPortal: dev serves the portal with a demo administrator whose
// password its banner shows once; a key created there works at the
// gateway at once. Dev's /metrics also carries the model servers' and the
// portal's metrics beside the central plane's.
func TestDevPortal(t *testing.T) {
	gpu := vllmfake.Start(t)
	o := newOutputs()
	d := startCommand(t, o, "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--vllm", "gpu="+gpu.URL)
	portalURL := strings.TrimSuffix(d.match(t, `Portal:\s+(http://\S+)`), "/")
	password := d.match(t, `tenant demo, user admin, password (\S+)  \(shown this once\)`)
	base := d.match(t, `Base URL:\s+(http://\S+)/v1`)
	metrics := d.match(t, `Metrics:\s+http://(\S+)/metrics`)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &formClient{t: t, base: portalURL, c: &http.Client{Jar: jar}}
	st, body := b.send(http.MethodPost, "/login", url.Values{"tenant": {"demo"}, "user": {"admin"}, "password": {password}})
	if st != http.StatusOK || !strings.Contains(body, "Virtual keys") {
		t.Fatalf("sign-in: %d\n%s", st, body)
	}
	st, body = b.send(http.MethodGet, "/keys/new", nil)
	if st != http.StatusOK || !strings.Contains(body, `value="gpu/meta-llama/Llama-3.1-8B-Instruct"`) {
		t.Fatalf("the form does not offer the model server's model: %d\n%s", st, body)
	}
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)[1]
	st, body = b.send(http.MethodPost, "/keys", url.Values{"csrf": {token}, "label": {"from the portal"},
		"models": {"some"}, "model": {"builtin/echo"}, "rpm": {"60"}, "tpd": {"0"}})
	m := regexp.MustCompile(`<code id="secret">(tgk_\S+)</code>`).FindStringSubmatch(body)
	if st != http.StatusCreated || m == nil {
		t.Fatalf("create: %d\n%s", st, body)
	}
	// The gateway's key cache follows etcd's watch: the key works as soon
	// as the cache has it.
	pollFor(t, "the new key at the gateway", func() bool {
		code, _, _ := webtest.Get(t, base+"/v1/models", m[1])
		return code == http.StatusOK
	})
	webtest.Chat(t, base, m[1], "hello")

	_, page := httpGet(t, "http://"+metrics+"/metrics", "")
	for _, want := range []string{`tollgate_model_server_up{namespace="gpu"} 1`, `tollgate_portal_key_operations_total{operation="create"} 1`, `tollgate_portal_sign_ins_total{outcome="ok"} 1`,
		// The in-process central plane's metrics, beside the appliance's.
		`tollgate_central_ingest_uploads_total{outcome="stored"} `} {
		if !strings.Contains(string(page), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestPortalAddAdmin(t *testing.T) {
	endpoints := strings.Join(etcdtest.Endpoints(t), ",")
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"portal", "add-admin", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol"}, &out, &errOut)
	m := regexp.MustCompile(`password: (\S+) \(shown this once\)`).FindStringSubmatch(out.String())
	if code != 0 || m == nil {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	admins := portal.NewAdmins(etcdtest.ClientAt(t, etcdtest.Endpoints(t), ""), nil)
	if ok, _, err := admins.Verify(context.Background(), "addadmin", "carol", m[1]); !ok || err != nil {
		t.Fatalf("the printed password does not verify: %v %v", ok, err)
	}
	// Never overwritten.
	var errOut2 lockedbuf.Buffer
	code = run(context.Background(), []string{"portal", "add-admin", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol"}, &out, &errOut2)
	if code != 1 || !strings.Contains(errOut2.String(), "already exists") {
		t.Fatalf("a second carol: exit %d, %s", code, errOut2.String())
	}

	// A reset from a file; the old password no longer verifies.
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("the operator's choice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out3, errOut3 lockedbuf.Buffer
	code = run(context.Background(), []string{"portal", "set-password", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol", "--password-file", file}, &out3, &errOut3)
	if code != 0 || strings.Contains(out3.String(), "password:") {
		t.Fatalf("set-password: exit %d, %s%s", code, out3.String(), errOut3.String())
	}
	if ok, _, _ := admins.Verify(context.Background(), "addadmin", "carol", m[1]); ok {
		t.Fatal("the old password still verifies")
	}
	if ok, _, err := admins.Verify(context.Background(), "addadmin", "carol", "the operator's choice"); !ok || err != nil {
		t.Fatalf("the file's password: %v %v", ok, err)
	}
	// A lost phone: the operator turns carol's two-step sign-in off.
	if _, err := admins.SetTOTP(context.Background(), "addadmin", "carol", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", 0); err != nil {
		t.Fatal(err)
	}
	listAdmins := func() string {
		t.Helper()
		var list, errList lockedbuf.Buffer
		if code := run(context.Background(), []string{"portal", "list-admins", "--etcd-endpoints", endpoints, "--tenant", "addadmin"}, &list, &errList); code != 0 {
			t.Fatalf("list-admins: exit %d, %s", code, errList.String())
		}
		return list.String()
	}
	if l := listAdmins(); !regexp.MustCompile(`^addadmin\tcarol\tadded \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\ttwo-step on\n$`).MatchString(l) {
		t.Fatalf("list-admins: %q", l)
	}
	var outReset, errReset lockedbuf.Buffer
	code = run(context.Background(), []string{"portal", "reset-two-step", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol"}, &outReset, &errReset)
	if code != 0 {
		t.Fatalf("reset-two-step: exit %d, %s", code, errReset.String())
	}
	if l := listAdmins(); !strings.HasSuffix(l, "\ttwo-step off\n") {
		t.Fatalf("list-admins after the reset: %q", l)
	}
	var out4, errOut4 lockedbuf.Buffer
	code = run(context.Background(), []string{"portal", "remove-admin", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol"}, &out4, &errOut4)
	if code != 0 {
		t.Fatalf("remove-admin: exit %d, %s", code, errOut4.String())
	}
	var out5, errOut5 lockedbuf.Buffer
	code = run(context.Background(), []string{"portal", "remove-admin", "--etcd-endpoints", endpoints, "--tenant", "addadmin", "--user", "carol"}, &out5, &errOut5)
	if code != 1 || !strings.Contains(errOut5.String(), "no such administrator") {
		t.Fatalf("removing carol twice: exit %d, %s", code, errOut5.String())
	}
}

func TestPortalFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--portal-addr", "0.0.0.0:0"}, 2, "without TLS"},
		{[]string{"--portal-addr", ":0"}, 2, "without TLS"},
		{[]string{"--portal-tls-cert", "cert.pem"}, 2, "go together"},
		{[]string{"--portal-public-origin", "portal.example.com"}, 2, "--portal-public-origin"},
		{[]string{"--portal-sign-ins-per-address", "0"}, 2, "--portal-sign-ins-per-address 0"},
	} {
		var out, errOut lockedbuf.Buffer
		args := append([]string{"dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
			"--central-addr", "127.0.0.1:0", "--log-level", "error"}, tc.args...)
		if code := run(context.Background(), args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, %s; want %d", tc.args, code, errOut.String(), tc.code)
		}
	}
}

// --portal-sign-ins-per-address sets how many sign-ins one address may
// start before it gets 429.
func TestDevPortalSignInsPerAddress(t *testing.T) {
	o := newOutputs()
	d := startCommand(t, o, "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--portal-sign-ins-per-address", "2")
	portalURL := strings.TrimSuffix(d.match(t, `Portal:\s+(http://\S+)`), "/")
	b := &formClient{t: t, base: portalURL, c: &http.Client{}}
	wrong := url.Values{"tenant": {"demo"}, "user": {"admin"}, "password": {"not the password"}}
	for i, want := range []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusTooManyRequests} {
		if st, body := b.send(http.MethodPost, "/login", wrong); st != want {
			t.Fatalf("sign-in %d: %d, want %d\n%s", i+1, st, want, body)
		}
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key as PEM files, and returns their paths and a pool trusting it.
func writeSelfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "portal.pem"), filepath.Join(dir, "portal-key.pem")
	certPEM, err := tlsconf.WriteSelfSigned(certFile, keyFile, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if pool, err = tlsconf.Pool(certPEM); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}

// With a certificate the portal serves HTTPS only, and its
// session cookie is __Host- prefixed and Secure.
func TestDevPortalTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	o := newOutputs()
	d := startCommand(t, o, "dev", "--data", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--portal-tls-cert", certFile, "--portal-tls-key", keyFile,
		"--portal-require-two-step")
	portalURL := strings.TrimSuffix(d.match(t, `Portal:\s+(https://\S+)`), "/")
	password := d.match(t, `tenant demo, user admin, password (\S+)  \(shown this once\)`)

	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequest(http.MethodPost, portalURL+"/login",
		strings.NewReader(url.Values{"tenant": {"demo"}, "user": {"admin"}, "password": {password}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", portalURL)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	set := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(set, "__Host-tollgate_portal=") || !strings.Contains(set, "; Secure") ||
		resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("sign-in over TLS: %d, Set-Cookie %q, HSTS %q", resp.StatusCode, set, resp.Header.Get("Strict-Transport-Security"))
	}
	// With --portal-require-two-step, an account without it is sent to
	// set it up.
	req, err = http.NewRequest(http.MethodGet, portalURL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", strings.SplitN(set, ";", 2)[0])
	if resp, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/two-step" {
		t.Fatalf("the keys page without two-step: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Plain HTTP on the same port is not served.
	if resp, err := http.Get("http://" + strings.TrimPrefix(portalURL, "https://") + "/login"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the TLS portal answered plain HTTP")
		}
	}
}
