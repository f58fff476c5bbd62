package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/format/metrics"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
)

// TestTrainWritesReport: annactl train draws DIR/report.html from the
// metrics train.Run reports — the file redraws from DIR/metrics.jsonl —
// and --technique names only the papers' methods.
func TestTrainWritesReport(t *testing.T) {
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	src := testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
	var lines strings.Builder
	topics := []string{"apple", "river", "guitar", "planet", "doctor", "bread"}
	for i := range 12 {
		a, b := topics[i%len(topics)], topics[(i+1)%len(topics)]
		line, _ := json.Marshal(map[string]any{"query": fmt.Sprintf("about the %s %d", a, i), "pos": []string{"a " + a}, "neg": []string{"a " + b, "the " + b}})
		lines.Write(append(line, '\n'))
	}
	data := filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(data, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	r := mustRun(t, "train", "--model", src, "--input", data, "--output", out, "--steps", "2", "--batch-queries", "2", "--group", "3",
		"--max-length", "16", "--eval-fraction", "-1", "--no-export", "--seed", "3")
	if !strings.Contains(r.stdout, "report: "+filepath.Join(out, reportFile)) {
		t.Fatalf("train: %s", r)
	}
	html, err := os.ReadFile(filepath.Join(out, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := metrics.Read(f)
	if err != nil || len(m.Steps) != 2 {
		t.Fatalf("metrics: %+v, %v", m, err)
	}
	if n := bytes.Count(html, []byte("<svg")); n < 3 || !bytes.Contains(html, []byte("model "+filepath.Base(src))) {
		t.Fatalf("report has %d <svg> elements, title %v", n, bytes.Contains(html, []byte(filepath.Base(src))))
	}
	if r := annactl(t, "", "train", "--model", src, "--input", data, "--output", out, "--technique", "nope"); r.code != 2 || !strings.Contains(r.stderr, `"nope"`) {
		t.Fatalf("unknown technique: %s", r)
	}
}
