package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/mining"
)

// mine-negatives' run: the teacher, the fusion teacher's calibration,
// the stats file.

// calibrationPath is where the fusion teacher's calibration is kept.
func calibrationPath(output string) string { return output + ".teacher.json" }

func (a *app) runMineWith(ctx context.Context, r mineRun) error {
	opt, eng, enc, rr, output, statsPath := r.opt, r.eng, r.enc, r.rr, r.output, r.stats
	var teacher mining.Teacher
	var fusion *mining.FusionTeacher
	switch r.teacher {
	case "dense":
		teacher = &mining.DenseTeacher{Enc: enc, Label: "dense:" + modelLabel(enc), Vectors: mining.StoredVectors(eng)}
	case "fusion":
		fusion = &mining.FusionTeacher{Signals: []mining.Teacher{
			mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}},
			&mining.DenseTeacher{Enc: enc, Label: "dense:" + modelLabel(enc), Vectors: mining.StoredVectors(eng)},
		}}
		for _, o := range r.others {
			fusion.Signals = append(fusion.Signals, &mining.DenseTeacher{Enc: o.enc, Label: "dense:" + modelLabel(o.enc), Vectors: mining.StoredVectors(o.eng)})
		}
		if rr != nil {
			// A cross-encoder given with --teacher fusion is one more
			// signal: the calibration weighs it against the others.
			fusion.Signals = append(fusion.Signals, &mining.CrossEncoderTeacher{R: rr, Label: "cross-encoder:" + rr.Manifest().Name})
		}
		teacher = fusion
	case "cross-encoder":
		if rr == nil {
			return usageErrorf("--teacher cross-encoder needs --reranker DIR")
		}
		teacher = &mining.CrossEncoderTeacher{R: rr, Label: "cross-encoder:" + rr.Manifest().Name}
	}
	var p *progress // the run's, once its source is open
	opt.Progress = func(done, _ int) {
		if p != nil {
			p.update(done, "")
		}
	}
	miner, err := mining.New(r.pipeline(), teacher, mining.EngineCorpus{E: eng}, opt)
	if err != nil {
		return err
	}
	if fusion != nil {
		if err := a.calibrateFusion(ctx, &r, miner, fusion); err != nil {
			return err
		}
	}
	src, err := r.openSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	p = a.progress("mining "+src.Name(), src.Len())
	st, runErr := miner.Run(ctx, src, output)
	p.done()
	if st != nil {
		st.Write(a.stderr)
		if statsPath == "" {
			statsPath = output + ".stats.json"
		}
		if b, err := json.MarshalIndent(statsJSON(st), "", "  "); err == nil {
			if err := os.WriteFile(statsPath, append(b, '\n'), 0o644); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if errors.Is(runErr, context.Canceled) {
		fmt.Fprintf(a.stderr, "stopped: %s is complete up to its last checkpoint; run the same command with --resume to continue\n", output)
	}
	return runErr
}

// calibrateFusion gives the fusion teacher its calibration: the one saved
// beside the output by the run being resumed, else a fit on the first
// queries of the input, saved for a later --resume.
func (a *app) calibrateFusion(ctx context.Context, r *mineRun, miner *mining.Miner, t *mining.FusionTeacher) error {
	path := calibrationPath(r.output)
	if r.opt.Resume {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			var c mining.Calibration
			if err := json.Unmarshal(b, &c); err != nil {
				return fmt.Errorf("%s: %w (delete it and the output to start over)", path, err)
			}
			t.Cal = &c
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	src, err := r.openSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(a.stderr, "calibrating the fusion teacher on the first %d queries...\n", r.calibrate)
	c, err := miner.Calibrate(ctx, src, r.calibrate, t)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "fusion teacher: %s\n  on %d queries (%d positives, %d candidates): AUC %.4f (signals alone %s), weights %s\n",
		t.Name(), c.Units, c.Positives, c.Negatives, c.AUC, floats(c.SignalAUC), floats(c.Weights))
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// statsJSON is the stats file: the counters plus readable score summaries
// (the raw quantile sample stays in the progress file only).
func statsJSON(st *mining.Stats) any {
	sum := func(s *mining.Summary) map[string]float64 {
		if s.N == 0 {
			return map[string]float64{"n": 0}
		}
		return map[string]float64{"n": float64(s.N), "mean": s.Mean(), "std": s.Std(), "min": s.Min,
			"p10": s.Quantile(0.1), "p50": s.Quantile(0.5), "p90": s.Quantile(0.9), "max": s.Max}
	}
	c := *st
	c.PosScores, c.NegScores = mining.Summary{}, mining.Summary{}
	return struct {
		mining.Stats
		PosScores map[string]float64 `json:"pos_scores"`
		NegScores map[string]float64 `json:"neg_scores"`
		Quality   map[string]float64 `json:"teacher_quality"`
	}{c, sum(&st.PosScores), sum(&st.NegScores), map[string]float64{
		"queries": float64(st.Quality.Units), "ndcg@10": st.Quality.NDCG10(), "top1_positive": st.Quality.Top1Rate()}}
}

func modelLabel(enc encoder.Encoder) string {
	type manifester interface{ ModelName() string }
	if m, ok := enc.(manifester); ok && m.ModelName() != "" {
		return m.ModelName()
	}
	fp := enc.Fingerprint()
	return fp[:min(12, len(fp))]
}
