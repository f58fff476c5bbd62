package mining

import (
	"testing"

	"github.com/anna-search/anna/engine"
)

// Pipeline: eng's search alone, or the RRF of eng's lists for the mode and
// the other indexes' dense lists.
func TestPipelineLists(t *testing.T) {
	a, b := &engine.Engine{}, &engine.Engine{}
	if r, ok := Pipeline(a, engine.ModeHybrid).(*EngineRetriever); !ok || r.E != a || r.Mode != engine.ModeHybrid {
		t.Fatalf("alone: %#v", Pipeline(a, engine.ModeHybrid))
	}
	for _, c := range []struct {
		mode engine.Mode
		want []string
	}{
		{engine.ModeHybrid, []string{"a lexical", "a dense", "b dense"}},
		{engine.ModeLexical, []string{"a lexical", "b dense"}},
		{engine.ModeDense, []string{"a dense", "b dense"}},
	} {
		f, ok := Pipeline(a, c.mode, b).(*FusedRetriever)
		if !ok || len(f.Lists) != len(c.want) {
			t.Fatalf("%s: %#v", c.mode, f)
		}
		for i, l := range f.Lists {
			r := l.(*EngineRetriever)
			name := map[*engine.Engine]string{a: "a", b: "b"}[r.E] + " " + string(r.Mode)
			if name != c.want[i] {
				t.Fatalf("%s: list %d is %s, want %s", c.mode, i, name, c.want[i])
			}
		}
	}
}
