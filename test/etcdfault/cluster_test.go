package etcdfault_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// member is one etcd member, a process of its own.
type member struct {
	name, dir, clientURL, peerURL string
	log                           string // its stderr
	cmd                           *exec.Cmd
	done                          chan struct{} // closed when the process has exited
	paused                        bool          // by SIGSTOP
}

// cluster is three etcd members on loopback, each a process that can be
// killed and restarted on its data directory.
type cluster struct {
	members []*member
	initial string // --initial-cluster
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startCluster starts a 3-member cluster and waits until it has a leader
// and answers a linearizable read.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	ports := freePorts(t, 6)
	c := &cluster{}
	var initial []string
	for i := range 3 {
		m := &member{
			name:      fmt.Sprintf("m%d", i+1),
			dir:       filepath.Join(t.TempDir(), "etcd"),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		m.log = m.dir + ".log"
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	c.initial = strings.Join(initial, ",")
	for i := range c.members {
		c.start(t, i)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if m.done == nil {
				continue
			}
			select {
			case <-m.done:
			default:
				_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
				<-m.done
			}
		}
	})
	c.awaitQuorum(t, 30*time.Second)
	return c
}

// endpoints are the members' client URLs.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// start starts member i, in a process group of its own.
func (c *cluster) start(t *testing.T, i int) {
	t.Helper()
	m := c.members[i]
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	m.cmd = exec.Command(memberBin, "--name", m.name, "--dir", m.dir, "--client-url", m.clientURL,
		"--peer-url", m.peerURL, "--initial-cluster", c.initial)
	m.cmd.Stderr = logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start etcd member %s: %v", m.name, err)
	}
	m.done = make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(m.done) }()
}

// running tells whether member i's process is alive and not paused.
func (c *cluster) running(i int) bool {
	m := c.members[i]
	if m.done == nil || m.paused {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// kill SIGKILLs member i and waits for its process to be gone.
func (c *cluster) kill(t *testing.T, i int) {
	t.Helper()
	m := c.members[i]
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill etcd member %s: %v", m.name, err)
	}
	<-m.done
	if b, _ := os.ReadFile(m.log); len(b) > 0 {
		t.Logf("etcd member %s's output: %s", m.name, b)
	}
}

// probe runs f with a client of member i alone, made for this call (a
// long-lived client's reconnection backoff would delay what is measured),
// under a short deadline.
func (c *cluster) probe(i int, f func(context.Context, *clientv3.Client) error) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{c.members[i].clientURL}, DialTimeout: 300 * time.Millisecond, Logger: zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return f(ctx, cli)
}

// leader returns the member that is leader by its own status, -1 if none
// of the running members is.
func (c *cluster) leader() int {
	for i := range c.members {
		if !c.running(i) {
			continue
		}
		var isLeader bool
		err := c.probe(i, func(ctx context.Context, cli *clientv3.Client) error {
			st, err := cli.Status(ctx, c.members[i].clientURL)
			if err != nil {
				return err
			}
			isLeader = st.Leader != 0 && st.Leader == st.Header.GetMemberId()
			return nil
		})
		if err == nil && isLeader {
			return i
		}
	}
	return -1
}

// quorum tells whether a running member answers a linearizable read,
// which needs a leader and a quorum behind it.
func (c *cluster) quorum() bool {
	for i := range c.members {
		if !c.running(i) {
			continue
		}
		if c.probe(i, func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.Get(ctx, "/etcdfault/probe")
			return err
		}) == nil {
			return true
		}
	}
	return false
}

// awaitQuorum polls until the cluster answers a linearizable read and has
// a leader, and returns when that was first seen.
func (c *cluster) awaitQuorum(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	poll(t, "etcd quorum and leader", within, func() bool {
		if !c.quorum() || c.leader() < 0 {
			return false
		}
		at = time.Now()
		return true
	})
	return at
}

// awaitMember polls until member i answers a linearizable read itself.
func (c *cluster) awaitMember(t *testing.T, i int, within time.Duration) {
	t.Helper()
	poll(t, "etcd member "+c.members[i].name+" serving", within, func() bool {
		return c.probe(i, func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.Get(ctx, "/etcdfault/probe")
			return err
		}) == nil
	})
}

// poll calls cond every 20 ms until it holds, failing the test after
// within. The processes it watches are other programs, whose state can
// only be polled.
func poll(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pause stops member i with SIGSTOP: its sockets stay open and answer
// nothing, as a hung or partitioned machine's do.
func (c *cluster) pause(t *testing.T, i int) {
	t.Helper()
	if err := syscall.Kill(-c.members[i].cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop etcd member %s: %v", c.members[i].name, err)
	}
	c.members[i].paused = true
}

// resume continues member i after pause.
func (c *cluster) resume(t *testing.T, i int) {
	t.Helper()
	if err := syscall.Kill(-c.members[i].cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatalf("continue etcd member %s: %v", c.members[i].name, err)
	}
	c.members[i].paused = false
}
