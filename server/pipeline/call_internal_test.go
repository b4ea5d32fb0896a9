package pipeline

import (
	"math"
	"testing"
)

func TestAddTokensSaturates(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{0, 0, 0},
		{3, 4096, 4099},
		{-2, 5, 3},
		{1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 7, 7, math.MaxInt64},
		{math.MaxInt64 - 7, 8, math.MaxInt64},
		{-1, math.MinInt64, math.MinInt64},
		{math.MinInt64, math.MinInt64, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
	} {
		if got := AddTokens(tc.a, tc.b); got != tc.want {
			t.Errorf("AddTokens(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
