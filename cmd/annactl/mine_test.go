package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMineFusionTeacher: --teacher fusion calibrates on the first queries,
// saves the calibration beside the output, reports the teacher's quality
// in the stats, and a --resume of the finished run reuses the calibration.
func TestMineFusionTeacher(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 40, 24, 5)
	out := filepath.Join(tmp, "mined.jsonl")
	args := []string{"mine-negatives", "--dataset", ds, "--split", "train", "--index", filepath.Join(tmp, "idx"),
		"--output", out, "--negatives", "3", "--top-k", "20", "--seed", "7", "--teacher", "fusion", "--calibrate", "12"}
	r := mustRun(t, args...)
	if !strings.Contains(r.stderr, "calibrating the fusion teacher on the first 12 queries") ||
		!strings.Contains(r.stderr, "fusion(bm25/max+dense:") {
		t.Fatalf("no calibration reported: %s", r)
	}
	var cal struct {
		Signals []string  `json:"signals"`
		Units   int       `json:"units"`
		Weights []float64 `json:"weights"`
	}
	b, err := os.ReadFile(out + ".teacher.json")
	if err != nil || json.Unmarshal(b, &cal) != nil || cal.Units != 12 || len(cal.Weights) != 2 || len(cal.Signals) != 2 {
		t.Fatalf("calibration file: %v %s", err, b)
	}
	var st struct {
		Teacher string             `json:"teacher"`
		Quality map[string]float64 `json:"teacher_quality"`
	}
	b, err = os.ReadFile(out + ".stats.json")
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("stats: %v %s", err, b)
	}
	if st.Quality["queries"] != 24 || st.Quality["ndcg@10"] <= 0 || st.Quality["ndcg@10"] > 1 || !strings.HasPrefix(st.Teacher, "fusion(") {
		t.Fatalf("stats: %s", b)
	}
	before, _ := os.ReadFile(out)
	r = mustRun(t, append(args, "--resume")...)
	if strings.Contains(r.stderr, "calibrating") {
		t.Fatalf("--resume calibrated again: %s", r)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) || len(before) == 0 {
		t.Fatal("--resume of a finished run changed its output")
	}
}
