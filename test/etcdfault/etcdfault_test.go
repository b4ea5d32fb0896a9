// Package etcdfault_test holds limits to their word through etcd
// failures: three `tollgate gateway` processes under load share a
// 3-member etcd cluster whose members are processes of their own; the
// leader hangs (SIGSTOP), then a follower is killed (no quorum), then
// both come back.
// No key is ever admitted past its RPM or TPD, every refusal is 429
// rate_limited or 503 limits_unavailable in the error envelope, and the
// time back to normal service is measured (docs/limits.md, "etcd
// failures"; figures in docs/measurements.md).
package etcdfault_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

var bin, memberBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-etcdfault-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if bin, err = tollgatetest.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		memberBin = filepath.Join(dir, "etcdmember")
		if out, err := exec.Command("go", "build", "-o", memberBin, "github.com/tollgate-dev/tollgate/test/etcdfault/etcdmember").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build etcdmember: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}
