package adapt

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMixMeasure is a measurement (skipped unless MIX_RUNS is set): it
// serves finished runs' trained students as adapt now does, mixed with
// their start by MIX (stage 3's mix; 1 for the student as trained) at
// MIX_MAXLEN tokens (default 256, MiniLM's), into RUN/mix-MIX-MAXLEN/
// student-mix/model, for `annactl reindex` and `annactl eval`:
//
//	MIX_RUNS=DIR1,DIR2 MIX=0.5 MIX_BASE=CHECKPOINT go test -v -run TestMixMeasure ./train/adapt
func TestMixMeasure(t *testing.T) {
	runs := os.Getenv("MIX_RUNS")
	if runs == "" {
		t.Skip("a measurement: set MIX_RUNS")
	}
	mix, err := strconv.ParseFloat(os.Getenv("MIX"), 64)
	if err != nil {
		t.Fatalf("MIX: %v", err)
	}
	maxLen := 256
	if s := os.Getenv("MIX_MAXLEN"); s != "" {
		if maxLen, err = strconv.Atoi(s); err != nil {
			t.Fatalf("MIX_MAXLEN: %v", err)
		}
	}
	for _, d := range strings.Split(runs, ",") {
		r := &run{cfg: Config{Work: filepath.Join(d, "mix-"+os.Getenv("MIX")+"-"+strconv.Itoa(maxLen)), Mix: mix}, st: &state{}}
		dir, err := r.mix(context.Background(), os.Getenv("MIX_BASE"), filepath.Join(d, "work/student/hf"), maxLen)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(dir)
	}
}
