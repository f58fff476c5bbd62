package filter_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/anna-search/anna/filter"
)

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// nestedNot is {"not": {"not": ... {"k": "v"} ...}}, depth nots deep.
func nestedNot(depth int) string {
	return strings.Repeat(`{"not": `, depth) + `{"k": "v"}` + strings.Repeat(`}`, depth)
}

// nestedAnd is {"and": [{"and": [ ... {"k": "v"} ... ]}]}.
func nestedAnd(depth int) string {
	return strings.Repeat(`{"and": [`, depth) + `{"k": "v"}` + strings.Repeat(`]}`, depth)
}

// TestDeepFilterBounded: issue 59's first finding. A filter nested 9,990
// deep (80 KB of JSON) once cost the server 518 MB: Parse built the JSON
// path of every level as a string and recursed without a bound. Now
// filters nest at most MaxDepth deep, Parse refuses deeper JSON as it
// reads it, and what it allocates is linear in the input.
func TestDeepFilterBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(int) string
	}{{"not", nestedNot}, {"and", nestedAnd}} {
		// The deepest accepted, and one more.
		if _, err := filter.Parse([]byte(tc.make(filter.MaxDepth))); err != nil {
			t.Errorf("%s nested %d deep: %v", tc.name, filter.MaxDepth, err)
		}
		_, err := filter.Parse([]byte(tc.make(filter.MaxDepth + 1)))
		var fe *filter.Error
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "nested") {
			t.Errorf("%s nested %d deep: %v, want an error saying it is nested too deep", tc.name, filter.MaxDepth+1, err)
		}
		for _, depth := range []int{9990, 100000} {
			in := []byte(tc.make(depth))
			var err error
			n := allocated(func() { _, err = filter.Parse(in) })
			if err == nil {
				t.Errorf("%s nested %d deep: accepted", tc.name, depth)
			} else if len(err.Error()) > 4096 {
				t.Errorf("%s nested %d deep: a %d-byte error", tc.name, depth, len(err.Error()))
			}
			if n > 2<<20 {
				t.Errorf("%s nested %d deep (%d bytes): Parse allocated %d bytes", tc.name, depth, len(in), n)
			}
		}
	}
}

// TestDeepFilterValidate: a filter built in Go (not parsed) nested deeper
// than MaxDepth is refused by Validate, which the engine calls on every
// search, at a cost linear in its size (40,000 levels of And took 86 s and
// some 16 GB through the library).
func TestDeepFilterValidate(t *testing.T) {
	f := filter.Eq("k", "v")
	for range 40000 {
		f = filter.And(f, filter.Eq("k", "w"))
	}
	var err error
	n := allocated(func() { err = f.Validate() })
	var fe *filter.Error
	if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "nested more than") {
		t.Fatalf("Validate of a 40,000-deep And: %v", err)
	}
	if n > 1<<20 {
		t.Errorf("Validate allocated %d bytes", n)
	}
	ok := filter.Eq("k", "v")
	for range filter.MaxDepth {
		ok = filter.Not(ok)
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("%d nots: %v", filter.MaxDepth, err)
	}
}

// TestFilterErrorsBounded: an error quotes a long key by its start.
func TestFilterErrorsBounded(t *testing.T) {
	long := strings.Repeat("k", 1<<20)
	for _, in := range []string{
		`{"` + long + `\u0000": "v"}`,
		`{"range": {"k": {"` + long + `": "1"}}}`,
		`{"in": {"` + long + `": []}}`,
		`{"` + long + `": "v", "` + long + `": "w"}`,
	} {
		_, err := filter.Parse([]byte(in))
		if err == nil || len(err.Error()) > 1024 {
			t.Errorf("a %d-byte filter: error of %d bytes", len(in), len(err.Error()))
		}
	}
}
