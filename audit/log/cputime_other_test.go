//go:build !unix

package log

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
