package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
)

// TestAdaptCommand: `annactl adapt` on a tiny index with a tiny random
// student: refused by a held-out check it cannot pass (and says so, the
// index left on its model), then run through to the reindex, the index
// (int8, index's default) kept at int8; bad input named.
func TestAdaptCommand(t *testing.T) {
	needModel(t)
	mc := testmodels.MiniLMVocab(testmodels.BERT()) // its tokenizer from the installed home
	base := testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
	ownHome(t)
	tmp := t.TempDir()
	idx := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", idx, writeCorpus(t, tmp, 30, 20, 4))
	tiny := []string{"adapt", "--index", idx, "--base", base, "--steps", "2", "--batch", "2", "--group", "3", "--max-length", "32", "--lr", "0.001"}

	if r := annactl(t, "", "adapt", "--steps", "2"); r.code != 2 || !strings.Contains(r.stderr, "--index") {
		t.Fatalf("no --index: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--queries", filepath.Join(tmp, "nope.log"))...); r.code == 0 || !strings.Contains(r.stderr, "nope.log") {
		t.Fatalf("a missing query log: %s", r)
	}

	if r := annactl(t, "", append(tiny, "--mix", "0")...); r.code != 2 || !strings.Contains(r.stderr, "--mix") {
		t.Fatalf("--mix 0: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--generate", "-1")...); r.code != 2 || !strings.Contains(r.stderr, "--generate") {
		t.Fatalf("--generate -1: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--generate", "2", "--generator", filepath.Join(tmp, "nope.gguf"))...); r.code == 0 || !strings.Contains(r.stderr, "nope.gguf") {
		t.Fatalf("a missing generator: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--generate", "2", "--generator", "no-such-decoder")...); r.code != 2 || !strings.Contains(r.stderr, "--generator") {
		t.Fatalf("an unknown generator: %s", r)
	}

	r := annactl(t, "", append(tiny, "--work", filepath.Join(tmp, "w1"), "--min-gain", "2")...)
	if r.code == 0 || !strings.Contains(r.stderr, "scored worse") || !strings.Contains(r.stdout, "the index keeps its model") || !strings.Contains(r.stdout, "held-out check") {
		t.Fatalf("a check that cannot pass: %s", r)
	}
	if st, _ := statsOf(t, idx); !strings.Contains(st.ModelName, "MiniLM") || st.Precision != "int8" {
		t.Fatalf("after a refusal the index's model is %q at %q; want MiniLM at int8 (index's default)", st.ModelName, st.Precision)
	}

	if !strings.Contains(r.stderr, "no teacher model installed (annactl models install bge-small-en-v1.5)") || !strings.Contains(r.stdout, "among its candidates") {
		t.Fatalf("without a teacher model: %s", r)
	}

	// Judged queries: the refused run checks again with them (a bad one
	// is named by line).
	judged := filepath.Join(tmp, "judged.jsonl")
	if err := os.WriteFile(judged, []byte(`{"query": "graph3", "pos_ids": ["d001"]}`+"\n"+`{"query": "a question", "pos_ids": ["no-such-doc"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w1 := append(tiny, "--work", filepath.Join(tmp, "w1"), "--min-gain", "2", "--judged", judged)
	if r := annactl(t, "", w1...); r.code == 0 || !strings.Contains(r.stderr, `judged.jsonl:2: document "no-such-doc" is not in the index`) {
		t.Fatalf("a judged query naming no document of the index: %s", r)
	}
	if err := os.WriteFile(judged, []byte(`{"query": "graph3", "pos_ids": ["d001", "d002"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := annactl(t, "", w1...); r.code == 0 || !strings.Contains(r.stdout, "held-out check, 1 query, nDCG@10 (whole corpus against your judged queries)") {
		t.Fatalf("judged queries: %s", r)
	}

	// With a teacher model (the default model stands in for a stronger
	// one), the whole-corpus check.
	r = mustRun(t, append(tiny, "--work", filepath.Join(tmp, "w2"), "--min-gain=-1", "--teacher-model", home.DefaultModelName)...)
	if !strings.Contains(r.stdout, "nDCG@10 (whole corpus") || !strings.Contains(r.stdout, "mixed with the base's, --mix 0.5") {
		t.Fatalf("adapt with a teacher model: %s", r)
	}
	// The fusion stage chose the adapted index's fusion, and the index
	// records it.
	if !strings.Contains(r.stdout, "fusion: hybrid nDCG@10 on ") || !strings.Contains(r.stdout, "the index now fuses by ") {
		t.Fatalf("adapt's fusion stage: %s", r)
	}
	if st, _ := statsOf(t, idx); !strings.Contains(r.stdout, "the index now fuses by "+st.Fusion+"\n") {
		t.Fatalf("the index fuses by %q; adapt said %s", st.Fusion, r.stdout)
	}
	if r := annactl(t, "", append(tiny, "--teacher-model", "auto", "--teacher-model", "x")...); r.code != 2 || !strings.Contains(r.stderr, "--teacher-model auto stands alone") {
		t.Fatalf("auto with another teacher model: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--negatives-from", "dense")...); r.code != 2 || !strings.Contains(r.stderr, "--negatives-from") {
		t.Fatalf("--negatives-from dense: %s", r)
	}
	if !strings.Contains(r.stdout, "the index now uses the adapted model") || !strings.Contains(r.stderr, "estimated time on this machine") ||
		!strings.Contains(r.stdout, "to go back: annactl reindex --index "+idx+" --model ") {
		t.Fatalf("adapt: %s", r)
	}
	// index builds at int8 by default: the adapted model keeps it.
	if !strings.Contains(r.stdout, "converted to int8") || !strings.Contains(r.stdout, "the index now uses the adapted model (int8") {
		t.Fatalf("adapt of an int8 index: %s", r)
	}
	if st, _ := statsOf(t, idx); st.ModelName != "adapted-int8" || st.Precision != "int8" {
		t.Fatalf("after adapt the index's model is %q at %q; want adapted-int8 at int8", st.ModelName, st.Precision)
	}

	// --serve ensemble: the index's model and the teacher model (its int8
	// form, for an int8 index) served as one, kept under the models folder.
	if r := annactl(t, "", append(tiny, "--serve", "bogus")...); r.code != 2 || !strings.Contains(r.stderr, "--serve") {
		t.Fatalf("--serve bogus: %s", r)
	}
	if r := annactl(t, "", append(tiny, "--serve", "ensemble", "--teacher-model", "none")...); r.code != 2 || !strings.Contains(r.stderr, "--serve ensemble joins the teacher models") {
		t.Fatalf("--serve ensemble without a teacher model: %s", r)
	}
	r = mustRun(t, "adapt", "--index", idx, "--work", filepath.Join(tmp, "w3"), "--serve", "ensemble", "--teacher-model", home.DefaultModelName)
	if !strings.Contains(r.stdout, "ensemble: ") || !strings.Contains(r.stdout, "not checked on held-out queries") || strings.Contains(r.stdout, "examples mined") {
		t.Fatalf("adapt --serve ensemble: %s", r)
	}
	if st, _ := statsOf(t, idx); st.ModelName != "ensemble" || st.Dim != mc.HiddenSize+384 {
		t.Fatalf("after --serve ensemble the index's model is %q of dim %d; want the ensemble of the student (%d) and MiniLM (384)", st.ModelName, st.Dim, mc.HiddenSize)
	}
	if r := mustRun(t, "models", "list"); !strings.Contains(r.stdout, "of adapted-int8 × ") || !strings.Contains(r.stdout, home.DefaultModelName+"-int8 × ") {
		t.Fatalf("models list after --serve ensemble: %s", r)
	}
}
