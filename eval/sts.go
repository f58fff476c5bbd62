package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// Pair is one judged sentence pair of a semantic textual similarity set
// (STS-B, SICK): a human similarity score for two sentences.
type Pair struct {
	S1, S2 string
	Score  float64
}

// ReadPairs reads STS pairs as JSON lines {"sentence1", "sentence2",
// "score"}, the layout of ../shared/datasets/stsbenchmark and sick. Blank
// lines are skipped; a line without both sentences or a finite score is an
// error naming name:line.
func ReadPairs(r io.Reader, name string) ([]Pair, error) {
	var out []Pair
	err := readJSONLines(r, name, func(raw []byte) error {
		var rec struct {
			S1    *string  `json:"sentence1"`
			S2    *string  `json:"sentence2"`
			Score *float64 `json:"score"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		switch {
		case rec.S1 == nil:
			return errors.New(`no "sentence1"`)
		case rec.S2 == nil:
			return errors.New(`no "sentence2"`)
		case rec.Score == nil || math.IsNaN(*rec.Score) || math.IsInf(*rec.Score, 0):
			return errors.New(`no finite "score"`)
		}
		out = append(out, Pair{*rec.S1, *rec.S2, *rec.Score})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readJSONLines calls each for every non-blank line of r; an error from it
// or from reading is returned naming name:line.
func readJSONLines(r io.Reader, name string, each func(raw []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			if perr := each(raw); perr != nil {
				return fmt.Errorf("eval: %s:%d: %w", name, line, perr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("eval: %s:%d: %w", name, line, err)
		}
	}
}

// ReadPairsFile is ReadPairs on a file.
func ReadPairsFile(path string) ([]Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return ReadPairs(f, path)
}

// Spearman is Spearman's rank correlation of x and y: Pearson's correlation
// of their ranks, tied values sharing their average rank (as
// scipy.stats.spearmanr, which MTEB and sentence-transformers use). It is
// NaN when fewer than two values or when either side is constant.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 2 {
		return math.NaN()
	}
	return pearson(ranks(x), ranks(y))
}

// ranks gives each value its 1-based rank, ties the mean of their ranks.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

func pearson(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	n := float64(len(x))
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// Cosine is the cosine similarity of a and b (0 when either is zero).
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
