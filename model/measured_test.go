package model

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordMeasurements(t *testing.T) {
	dir := t.TempDir()
	fp := NewFingerprinter()
	fp.Write([]byte("cross-encoder bytes"))
	m := &Manifest{Name: "rr", Architecture: "bert", Task: TaskRerank, NumLabels: 1, Dim: 8, MaxLength: 16, Fingerprint: fp.Sum("", false, 16)}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if h, _ := m.Helps(); h {
		t.Error("a reranker nobody measured helps")
	}
	lex := Measurement{Dataset: "scifact", Split: "test", Candidates: "lexical", Depth: 100, Metric: "ndcg@10", Before: 0.69, After: 0.71, Queries: 300, Date: "2026-11-25T23:00:00Z"}
	hyb := lex
	hyb.Candidates, hyb.Embedder, hyb.Before, hyb.After = "hybrid", "abc", 0.72, 0.70
	if err := RecordMeasurements(dir, []Measurement{lex}); err != nil {
		t.Fatal(err)
	}
	back, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h, f := back.Helps(); !h || f || back.Fingerprint != m.Fingerprint || len(back.Measured) != 1 {
		t.Fatalf("after one gain: helps %v (fusion %v), %+v", h, f, back.Measured)
	}
	if err := RecordMeasurements(dir, []Measurement{hyb}); err != nil {
		t.Fatal(err)
	}
	back, _ = LoadManifest(dir)
	if h, _ := back.Helps(); h || len(back.Measured) != 2 {
		t.Fatalf("a loss on hybrid candidates: helps %v, %+v", h, back.Measured)
	}
	if g, n := back.Gain(false); math.Abs(g) > 1e-12 || n != 2 {
		t.Errorf("gain %v over %d, want (0.02 − 0.02)/2 = 0 over 2", g, n)
	}
	// The same reranker fused by RRF with its candidates' lists: measured
	// apart, and it helps that way.
	fused := []Measurement{lex, hyb}
	for i := range fused {
		fused[i].Fusion, fused[i].After = true, fused[i].Before+0.01
	}
	if err := RecordMeasurements(dir, fused); err != nil {
		t.Fatal(err)
	}
	back, _ = LoadManifest(dir)
	if h, f := back.Helps(); !h || !f || len(back.Measured) != 4 || back.HelpsIn(false) || !back.HelpsIn(true) {
		t.Fatalf("helps fused: helps %v, fusion %v, %+v", h, f, back.Measured)
	}
	// A new measurement of the same thing replaces the old one.
	hyb.After = 0.73
	if err := RecordMeasurements(dir, []Measurement{hyb}); err != nil {
		t.Fatal(err)
	}
	back, _ = LoadManifest(dir)
	if h, f := back.Helps(); !h || f || len(back.Measured) != 4 {
		t.Fatalf("re-measured: helps %v (fusion %v; gain 0.0150 replacing beats 0.0100 fused), %+v", h, f, back.Measured)
	}
	bad := lex
	bad.Candidates = "rerank"
	if err := RecordMeasurements(dir, []Measurement{bad}); err == nil || !strings.Contains(err.Error(), "candidates") {
		t.Errorf("bad candidates: %v", err)
	}
	if back2, _ := LoadManifest(dir); len(back2.Measured) != 4 {
		t.Errorf("a refused measurement changed the manifest: %+v", back2.Measured)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ManifestFile+".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// An embedding model has no measurements.
	edir := t.TempDir()
	e := &Manifest{Name: "x", Architecture: "bert", Task: TaskEmbed, Dim: 8, MaxLength: 16, Pooling: PoolingMean, Fingerprint: m.Fingerprint}
	if err := WriteManifest(edir, e); err != nil {
		t.Fatal(err)
	}
	if err := RecordMeasurements(edir, []Measurement{lex}); err == nil || !strings.Contains(err.Error(), "reranker") {
		t.Errorf("embedding model: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	os.WriteFile(filepath.Join(edir, ManifestFile), []byte(strings.Replace(string(raw), `"task": "rerank"`, `"task": "embed", "pooling": "mean"`, 1)), 0o644)
	if _, err := LoadManifest(edir); err == nil || !strings.Contains(err.Error(), "field measured") {
		t.Errorf("an embedding manifest with measurements: %v", err)
	}
}
