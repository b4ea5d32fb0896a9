package etcdfault_test

import "testing"

func TestOverAdmitted(t *testing.T) {
	one := func(w int64) admitted { return admitted{w, w, 1} }
	span := func(a, b int64) admitted { return admitted{a, b, 1} }
	tests := []struct {
		name   string
		as     []admitted
		limit  int64
		window int64
		over   bool
	}{
		{"none", nil, 2, 0, false},
		{"at the limit", []admitted{one(5), one(5)}, 2, 0, false},
		{"one past it", []admitted{one(5), one(5), one(5)}, 2, 5, true},
		{"a straddler fits the next window", []admitted{one(5), one(5), span(5, 6)}, 2, 0, false},
		{"a straddler fits the previous window", []admitted{span(5, 6), one(6), one(6)}, 2, 0, false},
		{"straddlers fit neither", []admitted{one(5), one(5), span(5, 6), one(6), one(6)}, 2, 6, true},
		{"the earliest-ending straddler goes first", []admitted{span(4, 5), span(4, 6), one(5), one(6)}, 2, 0, false},
		{"a gap between windows", []admitted{one(1), one(1), one(9), one(9), one(9)}, 2, 9, true},
		{"tokens split over two days", []admitted{{1, 1, 70}, {1, 2, 50}, {2, 2, 60}}, 100, 0, false},
		{"tokens past the limit", []admitted{{1, 1, 70}, {1, 2, 50}, {2, 2, 90}}, 100, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, over := overAdmitted(tt.as, tt.limit)
			if over != tt.over || (over && w != tt.window) {
				t.Fatalf("overAdmitted = %d, %v; want %d, %v", w, over, tt.window, tt.over)
			}
		})
	}
}
