package weaviate

import (
	"errors"
	"testing"

	"github.com/anna-search/anna/filter"
)

// Ranges and typed values are refused by name, not sent to the cluster to
// fail there (or match nothing) with a decode error.
func TestUnsupportedFiltersSaySo(t *testing.T) {
	for name, f := range map[string]filter.Filter{
		"gte":    filter.Gte("year", "1960"),
		"range":  filter.Range("year", "1950", "1960"),
		"nested": filter.And(filter.Eq("lang", "en"), filter.Not(filter.Lt("year", "1960"))),
	} {
		if _, _, err := fromFilter(f); !errors.Is(err, ErrUnsupportedFilter) {
			t.Errorf("%s: %v, want ErrUnsupportedFilter", name, err)
		}
	}
	if _, ok, err := fromFilter(filter.And(filter.Eq("lang", "en"), filter.In("tag", "a", "b"))); err != nil || !ok {
		t.Fatalf("string filters: ok %v, %v", ok, err)
	}
}
