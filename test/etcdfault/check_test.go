package etcdfault_test

import (
	"container/heap"
	"sort"
)

// admitted is what one admission took (n requests or tokens) and the
// windows it may have been admitted in: first to last, the windows of its
// request's start and end. The gateway's clock decided which one; the
// test, outside, only knows the range.
type admitted struct {
	first, last int64
	n           int64
}

// overAdmitted reports whether the admissions cannot be placed in their
// windows without some window holding more than limit, and which window
// then overflows. Each admission is placed, possibly split, in windows of
// its range, earliest-ending first into each window in turn: if even that
// overflows, no placement fits, so a false answer proves no window was
// admitted past its limit, and a true one proves some was. (For weights
// of 1, requests, splitting changes nothing; for tokens it makes the
// check generous only to admissions whose request straddled midnight.)
func overAdmitted(as []admitted, limit int64) (window int64, over bool) {
	if len(as) == 0 {
		return 0, false
	}
	sorted := append([]admitted(nil), as...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].first < sorted[j].first })
	last := sorted[0].last
	for _, a := range sorted {
		last = max(last, a.last)
	}
	pending := &byLast{}
	next := 0
	for w := sorted[0].first; w <= last; w++ {
		for next < len(sorted) && sorted[next].first == w {
			a := sorted[next]
			heap.Push(pending, &a)
			next++
		}
		room := limit
		for pending.Len() > 0 && room > 0 {
			a := (*pending)[0]
			take := min(room, a.n)
			a.n -= take
			room -= take
			if a.n == 0 {
				heap.Pop(pending)
			}
		}
		if pending.Len() > 0 && (*pending)[0].last == w {
			return w, true
		}
	}
	return 0, false
}

// byLast is a min-heap of admissions by their last window.
type byLast []*admitted

func (h byLast) Len() int           { return len(h) }
func (h byLast) Less(i, j int) bool { return h[i].last < h[j].last }
func (h byLast) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byLast) Push(x any)        { *h = append(*h, x.(*admitted)) }
func (h *byLast) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
