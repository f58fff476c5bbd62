// Package fuzzcheck holds what the fuzz targets of the module's parsers
// assert besides "no panic": that a call on one input finishes within a
// bound (Go's fuzzing has no time limit per input: a hang stalls a worker
// silently) and allocates memory within a bound (a short input that makes
// a reader allocate gigabytes is a denial of service).
//
// It is imported by tests only.
package fuzzcheck

import (
	"runtime"
	"testing"
	"time"
)

// Within runs fn and fails t, naming what, when it has not returned after
// d: the input is then recorded as a failing one, even if fn never
// returns (it goes on running on its goroutine until the worker exits).
func Within(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case p := <-done:
		if p != nil {
			panic(p)
		}
	case <-timer.C:
		t.Fatalf("%s: still running after %v", what, d)
	}
}

// Allocated returns how many bytes fn allocates (all goroutines'; a fuzz
// worker runs one input at a time, so they are fn's).
func Allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
