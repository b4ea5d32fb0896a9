package sysmon

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// childEnv marks the test binary run as a child by TestReexec: it calls
// Reexec and prints its process id and GODEBUG instead of running tests.
const childEnv = "TOLLGATE_SYSMON_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := Reexec(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("pid", os.Getpid())
		fmt.Println("godebug", os.Getenv("GODEBUG"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReexec runs this test binary as a child that calls Reexec, and
// checks that the child started over as the same process with Setting in
// its GODEBUG, or did not when GODEBUG already set schedtrace.
func TestReexec(t *testing.T) {
	for _, tc := range []struct {
		godebug string // "" leaves GODEBUG out
		want    string
	}{
		{"", Setting},
		{"gctrace=0", "gctrace=0," + Setting},
		{"schedtrace=0", "schedtrace=0"},
	} {
		t.Run(tc.godebug, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutGODEBUG(os.Environ()), childEnv+"=1")
			if tc.godebug != "" {
				cmd.Env = append(cmd.Env, "GODEBUG="+tc.godebug)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				k, v, _ := strings.Cut(sc.Text(), " ")
				got[k] = v
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v (printed %q)", err, got)
			}
			if got["pid"] != strconv.Itoa(cmd.Process.Pid) {
				t.Errorf("the child printed pid %q, want its own %d: it did not start over in place", got["pid"], cmd.Process.Pid)
			}
			if got["godebug"] != tc.want {
				t.Errorf("GODEBUG after Reexec = %q, want %q", got["godebug"], tc.want)
			}
		})
	}
}

func withoutGODEBUG(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			out = append(out, kv)
		}
	}
	return out
}
