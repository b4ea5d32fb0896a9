package ids

import (
	"errors"
	"regexp"
	"testing"
	"time"
)

func TestChecks(t *testing.T) {
	tests := []struct {
		name  string
		check func(string) error
		in    string
		ok    bool
	}{
		{"tenant ok", CheckTenant, "acme", true},
		{"tenant dash", CheckTenant, "acme-eu_1", true},
		{"tenant slash", CheckTenant, "acme/x", false},
		{"tenant upper", CheckTenant, "Acme", false},
		{"tenant empty", CheckTenant, "", false},
		{"appliance ok", CheckAppliance, "app_7f3k", true},
		{"appliance no prefix", CheckAppliance, "7f3k", false},
		{"appliance newline", CheckAppliance, "app_x\n", false},
		{"request ok", CheckRequest, "req_01J9ABC", true},
		{"request dash", CheckRequest, "req_a-b", false},
		{"key ok", CheckKey, "key_abc", true},
		{"key empty id", CheckKey, "key_", false},
		{"decision ok", CheckDecision, "dec_0123456789abcdef", true},
		{"decision bad", CheckDecision, "decision", false},
		{"valid tenant", asCheck(ValidTenant), "acme-eu_1", true},
		{"valid tenant slash", asCheck(ValidTenant), "acme/x", false},
		{"valid key", asCheck(ValidKey), "key_abc", true},
		{"valid key lower prefix only", asCheck(ValidKey), "KEY_abc", false},
		{"model ok", asCheck(ValidModel), "gpu/meta-llama/Llama-3.1-8B:fp8", true},
		{"model no namespace", asCheck(ValidModel), "llama", false},
		{"model empty name", asCheck(ValidModel), "gpu/", false},
		{"namespace ok", asCheck(ValidModelNamespace), "gpu.a_1", true},
		{"namespace slash", asCheck(ValidModelNamespace), "gpu/a", false},
		{"model name slash", asCheck(ValidModelName), "meta-llama/Llama", true},
		{"model name leading dot", asCheck(ValidModelName), ".x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(tt.in); (err == nil) != tt.ok {
				t.Fatalf("check(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}

// asCheck turns a Valid function into a Check one.
func asCheck(valid func(string) bool) func(string) error {
	return func(s string) error {
		if !valid(s) {
			return errInvalid
		}
		return nil
	}
}

var errInvalid = errors.New("invalid")

// TestMadeIdsMatch: the ids this package makes have its formats.
func TestMadeIdsMatch(t *testing.T) {
	if id := NewRequest(); CheckRequest(id) != nil {
		t.Fatalf("NewRequest() = %q, not a request id", id)
	}
	day := regexp.MustCompile(DayPattern)
	for _, d := range []string{Day(time.Now()), "2024-02-29", "0001-01-01"} {
		if _, err := ParseDay(d); err != nil || !day.MatchString(d) {
			t.Errorf("day %q: ParseDay %v, DayPattern match %v", d, err, day.MatchString(d))
		}
	}
}

func TestDay(t *testing.T) {
	at := time.Date(2026, 3, 1, 23, 30, 0, 0, time.FixedZone("x", -2*3600))
	if got := Day(at); got != "2026-03-02" {
		t.Fatalf("Day = %s, want the UTC day 2026-03-02", got)
	}
	end, err := DayEnd("2026-02-28")
	if err != nil || !end.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("DayEnd = %v, %v", end, err)
	}
	for _, bad := range []string{"2026-2-28", "2026-02-30", "", "2026-02-28T00:00:00Z"} {
		if _, err := ParseDay(bad); err == nil {
			t.Errorf("ParseDay(%q) accepted", bad)
		}
	}
}
