package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

// plane is what the replicas of one central plane share: the fleet CA
// they trust, the ingest certificate appliances trust (one for all
// replicas, so that a load balancer in front of them is one server to an
// appliance), the audit tokens and one PostgreSQL schema.
type plane struct {
	dir                string
	caFile, tokensFile string
	certFile, keyFile  string
	certPEM            []byte
	schema             string
}

func newPlane(t *testing.T, caPEM []byte, tokens map[string]string) *plane {
	t.Helper()
	p := &plane{dir: t.TempDir(), schema: pgtest.Schema(t, "fleet")}
	p.caFile = filepath.Join(p.dir, "fleet-ca.pem")
	if err := os.WriteFile(p.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	for tenant, token := range tokens {
		fmt.Fprintf(&y, "%s: [%s]\n", tenant, token)
	}
	p.tokensFile = filepath.Join(p.dir, "tokens.yaml")
	if err := os.WriteFile(p.tokensFile, []byte(y.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p.certFile, p.keyFile = filepath.Join(p.dir, "ingest.pem"), filepath.Join(p.dir, "ingest-key.pem")
	var err error
	if p.certPEM, err = tlsconf.WriteSelfSigned(p.certFile, p.keyFile, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is a running `tollgate central` process on the plane's schema.
type replica struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{}
	ingest string // host:port
	rest   string // http://host:port
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Bounded: only the start of a replica's log is kept for a failure
	// report.
	if s.b.Len() < 1<<20 {
		s.b.Write(p)
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a replica named name (its data directory, for the lock, is
// named after it) and waits for its banner. The test's cleanup kills it.
func (p *plane) start(t *testing.T, name string) *replica {
	t.Helper()
	r, err := p.launch(t, name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// launch is start without failing the test, for starting replicas from
// goroutines.
func (p *plane) launch(t *testing.T, name string) (*replica, error) {
	data := filepath.Join(p.dir, name)
	cmd := exec.Command(bin, "central", "--fleet-ca", p.caFile, "--audit-tokens", p.tokensFile, "--data", data,
		"--store", "postgres", "--postgres", pgtest.DSN(), "--postgres-schema", p.schema,
		"--rest-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--ingest-addr", "127.0.0.1:0",
		"--tls-cert", p.certFile, "--tls-key", p.keyFile,
		// Behind a TCP load balancer every appliance's connection comes
		// from the balancer's address: the per-address bound (256) would
		// close all but the first 256 (docs/central.md, "Running a fleet").
		"--ingest-max-conns-per-host", "4096",
		"--log-level", "error")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", name, err)
	}
	errBuf := &syncBuffer{}
	cmd.Stderr = errBuf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("replica %s: %w", name, err)
	}
	r := &replica{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, errBuf.String())
		}
	})
	addrs, err := tollgatetest.Banner(stdout, "REST", "Ingest")
	if err != nil {
		r.kill()
		return nil, fmt.Errorf("tollgate central %s: %w\n%s", name, err, errBuf.String())
	}
	rest, _, _ := strings.Cut(addrs["REST"], "/v1/")
	r.ingest, r.rest = addrs["Ingest"], rest
	return r, nil
}

// kill ends the replica with SIGKILL: no shutdown, its uploads in flight
// and its PostgreSQL transactions cut where they are.
func (r *replica) kill() {
	if r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-r.done
}

// balancer is a round-robin TCP load balancer on loopback, as a site puts
// in front of central replicas: each connection goes to the next backend
// that accepts it, and stays there. It passes TLS through (the replicas
// must see the appliance certificates).
type balancer struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	served   []atomic.Int64 // connections per backend slot
	wg       sync.WaitGroup
}

func newBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}, served: make([]atomic.Int64, len(backends))}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

// set points backend slot i at addr (a restarted replica's new address).
func (b *balancer) set(i int, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends[i] = addr
}

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.proxy(c)
		}()
	}
}

// pick dials the backends in turn from the next one, and returns the
// first that accepts.
func (b *balancer) pick() (net.Conn, int, error) {
	b.mu.Lock()
	start := b.next
	b.next = (b.next + 1) % len(b.backends)
	backends := append([]string(nil), b.backends...)
	b.mu.Unlock()
	var errs []error
	for k := range backends {
		i := (start + k) % len(backends)
		c, err := net.DialTimeout("tcp", backends[i], time.Second)
		if err == nil {
			return c, i, nil
		}
		errs = append(errs, err)
	}
	return nil, 0, errors.Join(errs...)
}

func (b *balancer) proxy(c net.Conn) {
	defer c.Close()
	up, i, err := b.pick()
	if err != nil {
		return
	}
	defer up.Close()
	b.served[i].Add(1)
	if !b.track(c, up) {
		return
	}
	defer b.untrack(c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side ending ends both, as an L4 balancer resets the
		// client when its backend goes away.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (b *balancer) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

func (b *balancer) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}

// waitCtx is a context for a bounded wait in a test.
func waitCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// awayFromMidnight skips a test that would not end before the UTC day
// does: its trees are today's, and a head signed after midnight is the
// day's final one, after which a tree takes no head.
func awayFromMidnight(t *testing.T, need time.Duration) {
	t.Helper()
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if midnight.Sub(now) < need {
		t.Skipf("the UTC day ends in %s, before the test would", midnight.Sub(now).Round(time.Second))
	}
}
