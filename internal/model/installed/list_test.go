package installed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/model"
)

// TestHelpfulReranker: of the installed rerankers, the one measured to
// help with the largest gain is chosen (an embedder, an unmeasured
// reranker, one that hurt and a half-written install are not); with
// alone, only one whose own order helped counts, and the others are
// named with their verdicts.
func TestHelpfulReranker(t *testing.T) {
	models := t.TempDir()
	if dir, others, err := HelpfulReranker(filepath.Join(models, "none"), false); err != nil || dir != "" || others != nil {
		t.Fatalf("missing models dir: %q %v %v", dir, others, err)
	}
	meas := func(fusion bool, before, after float64) model.Measurement {
		return model.Measurement{Dataset: "d", Split: "test", Candidates: "hybrid", Depth: 10, Fusion: fusion, Metric: "ndcg@10", Before: before, After: after, Queries: 5}
	}
	add := func(name string, task string, ms ...model.Measurement) {
		m := fakeModel(t, filepath.Join(models, name), name, name)
		m.Task, m.Measured = task, ms
		if task == model.TaskRerank {
			m.NumLabels = 1
		}
		if err := model.WriteManifest(filepath.Join(models, name), m); err != nil {
			t.Fatal(err)
		}
	}
	add("embedder", model.TaskEmbed)
	add("unmeasured", model.TaskRerank)
	add("hurts", model.TaskRerank, meas(false, 0.5, 0.4))
	add("fused", model.TaskRerank, meas(true, 0.5, 0.7))
	add("alone", model.TaskRerank, meas(false, 0.5, 0.55))
	add("alone.partial", model.TaskRerank, meas(false, 0.5, 0.9))
	if err := os.MkdirAll(filepath.Join(models, "not-a-model"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, others, err := HelpfulReranker(models, false)
	if err != nil || dir != filepath.Join(models, "fused") || len(others) != 2 {
		t.Fatalf("HelpfulReranker: %q %q %v", dir, others, err)
	}
	dir, others, err = HelpfulReranker(models, true)
	if err != nil || dir != filepath.Join(models, "alone") || len(others) != 3 {
		t.Fatalf("HelpfulReranker alone: %q %q %v", dir, others, err)
	}
	if !strings.HasPrefix(others[0], "fused (helps (used unasked, fused by RRF): fused with the candidates' lists by RRF nDCG@10 +0.2000 over 1)") ||
		!strings.Contains(strings.Join(others, ";"), "unmeasured (not measured)") {
		t.Fatalf("others: %q", others)
	}
}
