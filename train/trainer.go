package train

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// trainer turns groups into batches and runs the objective: the
// contrastive step over net's passes, a technique's step, or the
// cross-encoder step over [CLS] passes with head's classifier.
type trainer struct {
	cfg  *Config
	tok  *tokenizer.Tokenizer
	net  passer            // the model's passes (the plain and cross-encoder steps)
	dim  int               // the width of a pooled row
	tech decoder.Technique // the technique's step, or nil
	head *bert.Model       // a cross-encoder's head, run on the host; nil for bi-encoders
}

func (tr *trainer) batch(encs []tokenizer.Encoding) *bert.Batch {
	return padBatch(encs, tr.tok.PadID())
}

// padBatch pads encodings into one right-padded batch: the loop's batches
// are bert.Batch (ids, token types, mask); a decoder reads the ids and
// mask.
func padBatch(encs []tokenizer.Encoding, padID int64) *bert.Batch {
	return bert.PaddedBatch(tokenizer.Pad(encs, padID))
}

func decoderBatch(b *bert.Batch) *decoder.Batch {
	return &decoder.Batch{N: b.N, T: b.T, IDs: b.IDs, Mask: b.Mask, Ctx: b.Ctx}
}

// grad computes the loss of the groups and, when backward, adds scale × its
// gradient to the params. Cancelling ctx stops the passes between layers
// (bert.Batch.Ctx) with its error, the gradients then partial.
func (tr *trainer) grad(ctx context.Context, gs []group, scale float32, backward bool) (objective.Loss, error) {
	cfg := tr.cfg
	Q, G := len(gs), cfg.GroupSize
	if cfg.Objective != ObjectiveContrastive {
		return tr.cross(ctx, gs, scale, backward)
	}
	texts := make([]string, 0, Q*(G+1))
	// Teacher scores for the whole batch or none: data may mix examples
	// with scores (mined) and without (pairs, NLI) when distillation is
	// off (with it on, ReadExamples wants them all).
	var teacher []float32
	for _, g := range gs {
		texts = append(texts, g.query)
	}
	for _, g := range gs {
		texts = append(texts, g.docs...)
		teacher = append(teacher, g.teacher...) // G scores or none (sampleGroup)
	}
	if len(teacher) != Q*G {
		teacher = nil
	}
	b := tr.batch(tr.tok.EncodeBatch(texts, cfg.MaxLength))
	b.Ctx = ctx
	cc := objective.ContrastiveConfig{Temperature: cfg.Temperature, InBatch: !cfg.NoInBatch, DistillWeight: cfg.DistillWeight, TeacherTemperature: cfg.TeacherTemperature}
	if tr.tech != nil {
		s := &decoder.Step{Q: Q, G: G, Texts: texts, Batch: decoderBatch(b), Teacher: teacher}
		if !backward {
			return tr.tech.Eval(s, cc)
		}
		return tr.tech.Grad(s, cc, scale)
	}
	p := tr.net.pass(b, cfg.Pooling)
	if !backward {
		return objective.ContrastiveForward(p, b.N, Q, G, tr.dim, teacher, cc)
	}
	return objective.ContrastiveGrad(p, b.N, Q, G, tr.dim, teacher, cc, scale)
}

// cross is grad for the cross-encoder objectives: (query, document) pairs,
// the positive's label 1.
func (tr *trainer) cross(ctx context.Context, gs []group, scale float32, backward bool) (objective.Loss, error) {
	cfg := tr.cfg
	Q, G := len(gs), cfg.GroupSize
	var encs []tokenizer.Encoding
	var labels, teacher []float32
	for _, g := range gs {
		for k, d := range g.docs {
			encs = append(encs, tr.tok.EncodePair(g.query, d, cfg.MaxLength))
			labels = append(labels, float32(b2f(k == 0)))
		}
		teacher = append(teacher, g.teacher...)
	}
	if len(teacher) != Q*G {
		teacher = nil
	}
	b := tr.batch(encs)
	b.Ctx = ctx
	p := tr.net.pass(b, PoolCLS)
	cc := objective.CrossConfig{DistillWeight: cfg.DistillWeight, TeacherTemperature: cfg.TeacherTemperature}
	if !backward {
		return tr.head.CrossEval(p, b.N, cfg.Objective, labels, teacher, cc, Q, G)
	}
	return tr.head.CrossGrad(p, b.N, cfg.Objective, labels, teacher, cc, Q, G, scale)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// evaluate computes the held-out loss and accuracy, in batches; cancelling
// ctx stops it with ctx's error.
func (tr *trainer) evaluate(ctx context.Context, ex []Example) (*EvalResult, error) {
	cfg := tr.cfg
	ev := &EvalResult{}
	var correct int
	for lo := 0; lo < len(ex); lo += cfg.BatchSize {
		hi := min(len(ex), lo+cfg.BatchSize)
		var gs []group
		for i := lo; i < hi; i++ {
			gs = append(gs, sampleGroup(&ex[i], cfg.GroupSize, cfg.Seed, uint64(1<<40+i)))
		}
		l, err := tr.grad(ctx, gs, 0, false)
		if err != nil {
			return nil, fmt.Errorf("train: evaluation: %w", err)
		}
		ev.Loss += l.Value * float64(hi-lo)
		correct += l.Correct
	}
	ev.Queries = len(ex)
	ev.Loss /= float64(len(ex))
	ev.Accuracy = float64(correct) / float64(len(ex))
	return ev, nil
}
