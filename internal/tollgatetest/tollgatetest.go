// Package tollgatetest builds the tollgate binary and reads what its
// commands print on start, for the tests that run it as a process of its
// own (crash tests, end-to-end tests, benchmarks of the gateway as a
// remote client meets it).
package tollgatetest

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Build builds cmd/tollgate into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "tollgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate-dev/tollgate/cmd/tollgate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build tollgate: %w\n%s", err, out)
	}
	return bin, nil
}

// Banner reads the "is up" banner a tollgate command prints on stdout
// (lines such as "  Base URL:  http://127.0.0.1:8080/v1") until it has
// the value of every label in want, and returns them by label. The rest
// of r is read and discarded in the background, so that the process never
// blocks on a full pipe.
func Banner(r io.Reader, want ...string) (map[string]string, error) {
	res := make([]*regexp.Regexp, len(want))
	for i, label := range want {
		res[i] = regexp.MustCompile(regexp.QuoteMeta(label) + `:\s+(\S+)`)
	}
	got := make(map[string]string, len(want))
	sc := bufio.NewScanner(r)
	for len(got) < len(want) && sc.Scan() {
		for i, re := range res {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				got[want[i]] = m[1]
			}
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	if len(got) < len(want) {
		return got, fmt.Errorf("the banner ended without all of %q (got %v)", want, got)
	}
	return got, nil
}
