package hnsw

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/anna-search/anna/internal/safe"
)

// A panic on one of parallel's worker goroutines is raised again on the
// caller's goroutine, naming where it began, instead of ending the
// process.
func TestParallelPanicReachesTheCaller(t *testing.T) {
	g := NewGraph[int]()
	g.Workers = 4
	var calls atomic.Int32
	var got any
	func() {
		defer func() { got = recover() }()
		g.parallel(10000, func(_ *worker, i int) {
			calls.Add(1)
			if i == 10 {
				panic("graph boom")
			}
		})
	}()
	err, _ := got.(error)
	var p *safe.PanicError
	if !errors.As(err, &p) || p.Value != "graph boom" {
		t.Fatalf("recovered %#v, want a *safe.PanicError of graph boom", got)
	}
	// The graph's scratch pool is intact: a later run works.
	calls.Store(0)
	g.parallel(100, func(*worker, int) { calls.Add(1) })
	if c := calls.Load(); c != 100 {
		t.Errorf("after the panic, parallel made %d calls, want 100", c)
	}
}
