// Package rerank scores (query, document) pairs with a cross-encoder: a BERT
// sequence-classification model converted with `annactl models import
// --task rerank`, run in ONNX Runtime. Both texts go through the model
// together ([CLS] query [SEP] doc [SEP]), which is slower than comparing
// vectors but reads the pair jointly, so it reorders a short candidate list.
package rerank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/ort"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
	"github.com/anna-search/anna/tokenizer"
)

// Reranker scores documents for a query; higher is more relevant. Scores
// are comparable within one call (and across calls with the same model).
type Reranker interface {
	Score(ctx context.Context, query string, docs []string) ([]float32, error)
}

// Options tune an ORTReranker. Zero values pick the defaults.
type Options struct {
	IntraOpThreads int // default: all cores
	InterOpThreads int // default 1
	BatchSize      int // pairs per ONNX Runtime call (default 16)
	// MaxLength caps query+document tokens (default: the manifest's);
	// longer pairs are truncated longest-first, so long documents lose
	// their tail and the query is kept.
	MaxLength int
	// Label picks the logit column used as the score for models with more
	// than two labels (default: the last). See ORTReranker.
	Label int
}

// ORTReranker is a cross-encoder in ONNX Runtime. The score of a pair is
// the model's logit for num_labels 1 (the usual MS MARCO cross-encoders);
// for num_labels 2 it is logit[1] − logit[0], the log-odds of label 1
// ("relevant"), which orders pairs like its softmax probability; for more
// labels it is logit[Options.Label]. Safe for concurrent use.
type ORTReranker struct {
	dir    string
	man    *model.Manifest
	tok    *tokenizer.Tokenizer
	sess   *ortgo.DynamicAdvancedSession
	maxLen int
	batch  int
	label  int

	mu     sync.RWMutex
	closed bool
}

var _ Reranker = (*ORTReranker)(nil)

// Load opens the converted cross-encoder in modelDir.
func Load(ctx context.Context, modelDir string, opts Options) (*ORTReranker, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	md, err := model.OpenDir(modelDir)
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	man, cfg, onnxPath := md.Manifest, md.Config, md.ONNXPath
	if man.Task != model.TaskRerank {
		return nil, fmt.Errorf("rerank: %s is a %s model, not a cross-encoder (convert one with `annactl models import --task rerank`)", modelDir, man.Task)
	}
	r := &ORTReranker{dir: modelDir, man: man, maxLen: man.MaxLength, batch: opts.BatchSize, label: man.NumLabels - 1}
	if r.batch <= 0 {
		r.batch = 16
	}
	if opts.MaxLength > 0 {
		if opts.MaxLength > cfg.MaxPositionEmbeddings {
			return nil, fmt.Errorf("rerank: max length %d exceeds the model's max_position_embeddings %d", opts.MaxLength, cfg.MaxPositionEmbeddings)
		}
		r.maxLen = opts.MaxLength
	}
	if opts.Label != 0 {
		if man.NumLabels <= 2 || opts.Label < 0 || opts.Label >= man.NumLabels {
			return nil, fmt.Errorf("rerank: label %d not usable with a %d-label model", opts.Label, man.NumLabels)
		}
		r.label = opts.Label
	}
	r.tok, err = tokenizer.Load(filepath.Join(modelDir, onnx.TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	r.sess, err = ort.NewSession(onnxPath,
		[]string{onnx.InputIDs, onnx.InputMask, onnx.InputTypeIDs}, []string{onnx.OutputLogits},
		ort.Options{IntraOpThreads: opts.IntraOpThreads, InterOpThreads: opts.InterOpThreads})
	if err != nil {
		r.tok.Close()
		return nil, fmt.Errorf("rerank: %w", err)
	}
	return r, nil
}

// Close frees the session and tokenizer, waiting for running calls.
func (r *ORTReranker) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return errors.Join(r.sess.Destroy(), r.tok.Close())
}

// Manifest returns the model's manifest (do not modify it).
func (r *ORTReranker) Manifest() *model.Manifest { return r.man }

// Score returns one score per document, in input order. Pairs are sorted by
// length into batches to cut padding; ctx is checked between batches.
func (r *ORTReranker) Score(ctx context.Context, query string, docs []string) ([]float32, error) {
	logits, err := r.Logits(ctx, query, docs)
	if err != nil {
		return nil, err
	}
	L := r.man.NumLabels
	out := make([]float32, len(docs))
	for i := range out {
		row := logits[i*L : (i+1)*L]
		switch L {
		case 1:
			out[i] = row[0]
		case 2:
			out[i] = row[1] - row[0]
		default:
			out[i] = row[r.label]
		}
	}
	return out, nil
}

// Logits returns the raw logits, [len(docs) × num_labels] row-major.
func (r *ORTReranker) Logits(ctx context.Context, query string, docs []string) ([]float32, error) {
	return r.pairLogits(ctx, func(i int) string { return query }, docs)
}

// pairLogits scores pairs (query(i), docs[i]).
func (r *ORTReranker) pairLogits(ctx context.Context, query func(int) string, docs []string) ([]float32, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, errors.New("rerank: use of closed reranker")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	L := r.man.NumLabels
	encs := make([]tokenizer.Encoding, len(docs))
	for i, d := range docs {
		encs[i] = r.tok.EncodePair(query(i), d, r.maxLen)
	}
	order := make([]int, len(encs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(encs[order[a]].IDs) < len(encs[order[b]].IDs) })
	out := make([]float32, len(docs)*L)
	batch := make([]tokenizer.Encoding, 0, r.batch)
	for lo := 0; lo < len(order); lo += r.batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+r.batch, len(order))
		batch = batch[:0]
		for _, i := range order[lo:hi] {
			batch = append(batch, encs[i])
		}
		logits, err := r.run(batch)
		if err != nil {
			return nil, err
		}
		for j, i := range order[lo:hi] {
			copy(out[i*L:(i+1)*L], logits[j*L:(j+1)*L])
		}
	}
	for _, x := range out {
		if math.IsNaN(float64(x)) {
			return nil, fmt.Errorf("rerank: %s produced NaN logits", r.dir)
		}
	}
	return out, nil
}

func (r *ORTReranker) run(encs []tokenizer.Encoding) ([]float32, error) {
	ids, types, mask, seq := tokenizer.Pad(encs, r.tok.PadID())
	shape := ortgo.NewShape(int64(len(encs)), int64(seq))
	in := make([]ortgo.Value, 0, 3)
	defer func() {
		for _, v := range in {
			v.Destroy()
		}
	}()
	for _, data := range [][]int64{ids, mask, types} {
		t, err := ortgo.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("rerank: input tensor %v: %w", shape, err)
		}
		in = append(in, t)
	}
	out, err := ortgo.NewEmptyTensor[float32](ortgo.NewShape(int64(len(encs)), int64(r.man.NumLabels)))
	if err != nil {
		return nil, fmt.Errorf("rerank: output tensor: %w", err)
	}
	defer out.Destroy()
	if err := r.sess.Run(in, []ortgo.Value{out}); err != nil {
		return nil, fmt.Errorf("rerank: %s: running model on batch %v: %w", r.dir, shape, err)
	}
	return append([]float32(nil), out.GetData()...), nil
}
