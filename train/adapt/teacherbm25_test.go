package adapt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTeacherWithoutBM25: the calibrated teacher's signals are BM25 and the
// index's model by default, the index's model alone with
// TeacherWithoutBM25 (both runs stopped when training starts).
func TestTeacherWithoutBM25(t *testing.T) {
	tmp := t.TempDir()
	base := tinyBase(t, 512)
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 30)
	signals := func(work string, without bool) []string {
		c := tinyConfig(t, index, filepath.Join(tmp, work), base)
		c.TeacherWithoutBM25 = without
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c.Progress = func(p Progress) {
			if p.Stage == "train" {
				cancel()
			}
		}
		if _, err := Adapt(ctx, c); !errors.Is(err, context.Canceled) {
			t.Fatalf("TeacherWithoutBM25 %v: %v, want it stopped in training", without, err)
		}
		bs, err := os.ReadFile(filepath.Join(c.Work, "teacher.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cal struct{ Signals []string }
		if err := json.Unmarshal(bs, &cal); err != nil {
			t.Fatal(err)
		}
		return cal.Signals
	}
	bm25 := func(s string) bool { return strings.HasPrefix(s, "bm25") }
	if got := signals("with", false); len(got) != 2 || !slices.ContainsFunc(got, bm25) {
		t.Errorf("default teacher's signals %q, want BM25 and the index's model", got)
	}
	if got := signals("without", true); len(got) != 1 || slices.ContainsFunc(got, bm25) || !strings.HasPrefix(got[0], "dense:") {
		t.Errorf("TeacherWithoutBM25's signals %q, want the index's model alone", got)
	}
}
