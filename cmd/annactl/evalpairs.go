package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/internal/home"
)

// evalPairs embeds sentence pairs and reports, for --task sts, Spearman's
// correlation of their cosines with human similarity scores, or for --task
// pairclass the average precision of their cosines at telling entailment
// from contradiction.
func (a *app) evalPairs(ctx context.Context, dataset string, fl evalFlags) error {
	if fl.dir != "" || fl.reranker != "" || fl.modes != "" || fl.runOut != "" || fl.report != "" {
		return usageErrorf("--task %s embeds sentence pairs: --index, --reranker, --modes, --run-out and --report do not apply", fl.task)
	}
	split := fl.split
	if split == "" {
		split = "test"
		if _, err := os.Stat(filepath.Join(dataset, "test.jsonl")); err != nil {
			split = "test_annotated"
		}
	}
	path := filepath.Join(dataset, split+".jsonl")
	s1, s2, gold, err := readEvalPairs(path, fl.task)
	if err != nil {
		return err
	}
	enc, closeEnc, err := pairEncoder(ctx, fl)
	if err != nil {
		return err
	}
	defer closeEnc()
	// Each distinct sentence once: as a document, or with --instruction as
	// a query under it (both sides alike, as MTEB instructs decoder
	// embedders on symmetric tasks).
	index := map[string]int{}
	var texts []string
	for _, s := range slices.Concat(s1, s2) {
		if _, ok := index[s]; !ok {
			index[s] = len(texts)
			texts = append(texts, s)
		}
	}
	t0 := time.Now()
	var vecs [][]float32
	if fl.instruction != "" {
		vecs, err = enc.EmbedQueries(ctx, texts, encoder.Prompt{Instruction: fl.instruction})
	} else {
		vecs, err = enc.EmbedDocuments(ctx, texts)
	}
	if err != nil {
		return err
	}
	cos := make([]float64, len(gold))
	for i := range gold {
		cos[i] = eval.Cosine(vecs[index[s1[i]]], vecs[index[s2[i]]])
	}
	metric, name, label := "spearman", "Spearman (cosine vs. score)", "pairs"
	var v float64
	if fl.task == "sts" {
		v = eval.Spearman(cos, gold)
	} else {
		metric, name, label = "ap", "average precision (cosine, entailment vs. contradiction)", "entailment/contradiction pairs"
		pos := make([]bool, len(gold))
		for i, g := range gold {
			pos[i] = g == 1
		}
		v = eval.AveragePrecision(cos, pos)
	}
	if math.IsNaN(v) {
		return fmt.Errorf("eval: %s (split %s): %s undefined: every pair has the same cosine or the same gold score", dataset, split, name)
	}
	if fl.asJSON {
		out := map[string]any{"task": fl.task, "dataset": dataset, "split": split, "pairs": len(gold), metric: v, "model": enc.Fingerprint()}
		if fl.instruction != "" {
			out["instruction"] = fl.instruction
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	fmt.Fprintf(a.stdout, "%s (split %s): %d %s, %d sentences embedded in %s\n%s: %.4f\n",
		dataset, split, len(gold), label, len(texts), time.Since(t0).Round(time.Millisecond), name, v)
	return nil
}

// readEvalPairs reads the sentence pairs of path and their gold scores:
// the STS score, or 1 for entailment and 0 for contradiction (task
// pairclass; neutral pairs left out).
func readEvalPairs(path, task string) (s1, s2 []string, gold []float64, err error) {
	if task == "sts" {
		pairs, err := eval.ReadPairsFile(path)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, p := range pairs {
			s1, s2, gold = append(s1, p.S1), append(s2, p.S2), append(gold, p.Score)
		}
	} else {
		pairs, err := eval.ReadNLIPairsFile(path)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, p := range pairs {
			if p.Label != "neutral" {
				s1, s2 = append(s1, p.Premise), append(s2, p.Hypothesis)
				g := 0.0
				if p.Label == "entailment" {
					g = 1
				}
				gold = append(gold, g)
			}
		}
		if len(gold) == 0 {
			return nil, nil, nil, fmt.Errorf("eval: %s: no entailment or contradiction pairs", path)
		}
	}
	return s1, s2, gold, nil
}

// pairEncoder loads the model (--model, else the default), behind the
// embedding cache with --cache.
func pairEncoder(ctx context.Context, fl evalFlags) (enc encoder.Encoder, closeEnc func(), err error) {
	var ort *encoder.Model
	if fl.model == "" {
		ort, err = encoder.Default(ctx)
	} else {
		var dir string
		if dir, err = modelDir(fl.model); err == nil {
			ort, err = encoder.Load(ctx, dir, encoder.Options{})
		}
	}
	if err != nil {
		return nil, nil, err
	}
	enc = ort
	if fl.cache {
		if enc, err = encoder.NewCache(ort, home.EmbeddingCacheDir()); err != nil {
			ort.Close()
			return nil, nil, err
		}
	}
	return enc, func() { ort.Close() }, nil
}
