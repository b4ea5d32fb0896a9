package sysmon

import (
	"slices"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=" + Setting}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"GODEBUG=" + Setting, "A=1"}, true},
		{"other settings kept", []string{"GODEBUG=http2client=0,madvdontneed=1"},
			[]string{"GODEBUG=http2client=0,madvdontneed=1," + Setting}, true},
		{"schedtrace set by the operator", []string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{"schedtrace among others", []string{"GODEBUG=gctrace=1, schedtrace=1000"}, []string{"GODEBUG=gctrace=1, schedtrace=1000"}, false},
		{"a name that only ends in schedtrace", []string{"GODEBUG=xschedtrace=1"},
			[]string{"GODEBUG=xschedtrace=1," + Setting}, true},
		{"the first GODEBUG is the one read", []string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=0"},
			[]string{"GODEBUG=gctrace=1," + Setting, "GODEBUG=schedtrace=0"}, true},
		{"GODEBUGX is another variable", []string{"GODEBUGX=schedtrace=0"},
			[]string{"GODEBUGX=schedtrace=0", "GODEBUG=" + Setting}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			got, changed := Env(tc.env)
			if changed != tc.changed || !slices.Equal(got, tc.want) {
				t.Errorf("Env(%q) = %q, %v; want %q, %v", tc.env, got, changed, tc.want, tc.changed)
			}
			if !slices.Equal(tc.env, in) {
				t.Errorf("Env changed its argument to %q", tc.env)
			}
		})
	}
}
