package tollgatetest

import (
	"fmt"
	"os"
	"testing"
)

// Main is a TestMain for a package whose tests run the tollgate binary:
// it builds cmd/tollgate into a temporary directory, sets *bin to its
// path, runs the tests, removes the directory and exits with the tests'
// code (1, with the build's output, when the build fails).
func Main(m *testing.M, bin *string) {
	os.Exit(run(m, bin))
}

func run(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "tollgate-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
