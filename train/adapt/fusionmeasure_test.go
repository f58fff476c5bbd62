package adapt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// TestFusionChoiceMeasures is a measurement (skipped unless FUSION_INDEXES
// is set): for each index, the fusion stage's scores — hybrid nDCG@10 by
// each fusion against the pseudo-judgments of BM25 fused with the teacher
// models (FUSION_TEACHERS, installed names, comma-separated; default
// bge-small-en-v1.5,e5-small-v2) — on the extractive pseudo-queries of
// every tenth document (what the stage adds to a run's held-out queries),
// and the fusion it would record. Compare with each index's judged hybrid
// nDCG@10 by fusion (annactl eval --fusion F).
//
//	FUSION_INDEXES=DIR1,DIR2 go test -v -run TestFusionChoiceMeasures -timeout 0 ./train/adapt
func TestFusionChoiceMeasures(t *testing.T) {
	dirs := os.Getenv("FUSION_INDEXES")
	if dirs == "" {
		t.Skip("a measurement: set FUSION_INDEXES")
	}
	ctx := context.Background()
	names := "bge-small-en-v1.5,e5-small-v2"
	if s := os.Getenv("FUSION_TEACHERS"); s != "" {
		names = s
	}
	var teachers []string
	for _, n := range strings.Split(names, ",") {
		teachers = append(teachers, filepath.Join(home.ModelsDir(), n))
	}
	for _, dir := range strings.Split(dirs, ",") {
		eng, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		qs, err := extractiveCheck(ctx, eng, maxCheckQueries)
		if err != nil {
			t.Fatal(err)
		}
		r := &run{cfg: Config{Index: dir, TeacherModels: teachers}}
		scores, err := r.fusionScores(ctx, eng, qs)
		eng.Close()
		if err != nil {
			t.Fatal(err)
		}
		best := chooseFusion(scores)
		t.Logf("%s (%d queries; teachers %s): rrf %.4f, minmax %.4f, dbsf %.4f: chooses %s",
			dir, len(qs), names, scores[engine.FusionRRF], scores[engine.FusionMinMax], scores[engine.FusionDBSF], best)
	}
}
