package hnsw

import (
	"cmp"
	"slices"
)

// cand is a graph node (internal id) with its distance to the query.
type cand struct {
	id   uint32
	dist float32
}

// minHeap and maxHeap are hand-written binary heaps over cand. The generic
// heap package goes through container/heap's interface calls, which cost more
// than the distance computations they order at this size.
type minHeap []cand

func (h *minHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].dist <= s[i].dist {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *minHeap) pop() cand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].dist < s[l].dist {
			m = r
		}
		if s[i].dist <= s[m].dist {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

type maxHeap []cand

func (h *maxHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].dist >= s[i].dist {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *maxHeap) pop() cand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].dist > s[l].dist {
			m = r
		}
		if s[i].dist >= s[m].dist {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// keepBest adds c to h, which holds the k nearest candidates seen.
func (h *maxHeap) keepBest(c cand, k int) {
	if len(*h) < k || c.dist < (*h)[0].dist {
		h.push(c)
		if len(*h) > k {
			h.pop()
		}
	}
}

// sorted returns the heap's candidates by increasing distance (reusing
// its storage).
func (h maxHeap) sorted() []cand {
	out := []cand(h)
	slices.SortFunc(out, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
	return out
}

// visitedSet marks nodes seen during one search. Marks are epoch-stamped so
// starting a new search is O(1) instead of clearing n entries.
type visitedSet struct {
	marks []uint16
	epoch uint16
	todo  []uint32 // scratch: unvisited neighbors of the node being expanded
	buf   []float32
	ibuf  []int8
	ubuf  []uint8
}

// scratchI8 returns n int8 and n uint8 of scratch (a quantized query's).
func (v *visitedSet) scratchI8(n int) ([]int8, []uint8) {
	if len(v.ibuf) < n {
		v.ibuf, v.ubuf = make([]int8, n), make([]uint8, n)
	}
	return v.ibuf[:n], v.ubuf[:n]
}

// scratch returns n floats of scratch (a prepared query's).
func (v *visitedSet) scratch(n int) []float32 {
	if len(v.buf) < n {
		v.buf = make([]float32, n)
	}
	return v.buf[:n]
}

func (v *visitedSet) reset(n int) {
	if len(v.marks) < n {
		v.marks = make([]uint16, n+n/4+64)
		v.epoch = 0
	}
	v.epoch++
	if v.epoch == 0 {
		clear(v.marks)
		v.epoch = 1
	}
}

// visit marks id and reports whether it had been marked already.
func (v *visitedSet) visit(id uint32) bool {
	if v.marks[id] == v.epoch {
		return true
	}
	v.marks[id] = v.epoch
	return false
}
