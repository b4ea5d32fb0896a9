package ids

import (
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(tt.in); (err == nil) != tt.ok {
				t.Fatalf("check(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
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
