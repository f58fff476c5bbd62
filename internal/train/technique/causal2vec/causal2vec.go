// Package causal2vec trains a decoder embedder as paper 004 (Causal2Vec)
// does: a small bidirectional encoder pools each text into a vector h (k
// dims), a trainable MLP maps it to the decoder's width d — the
// "Contextual token" C = GELU(h·W1ᵀ)·W2ᵀ, W1 d×k, W2 d×d (Eq. 1) — and C
// enters the decoder's input after the instruction and before the text,
// x = [I; C; T; EOS] (Eq. 2), as an input embedding. The text's embedding
// is the concatenation of the decoder's last hidden states at C and at
// EOS (2·d dims), trained with train/objective's InfoNCE (cosine
// similarity / τ, in-batch and hard negatives) plus, when the step has
// teacher scores, its soft-label distillation term.
//
// Where the paper leaves something open, this package chooses:
//   - MLP biases: Eq. (1) has none, while the LLaVA-1.5 projector it cites
//     as its model (nn.Linear, GELU, nn.Linear) has them. Config.Bias
//     chooses; the default is Eq. (1) as written. The GELU is the exact
//     (erf) one, nn.GELU()'s. The MLP is initialised as nn.Linear is
//     (uniform ±1/√in); the paper does not say.
//   - The encoder's vector is used as the encoder gives it (the paper mean-
//     pools its last hidden state and does not normalise it); what text it
//     sees (with or without the query's instruction) is Config.EncoderText's
//     choice, the full text by default.
//   - The concatenation [h_C; h_EOS] is not normalised per half: the loss's
//     cosine normalises the whole 2·d vector, so the larger-norm EOS half
//     weighs more, as the paper's Appendix C.1 observes.
//   - C is inserted (the sequence grows by one) rather than replacing a
//     placeholder token (the paper's Appendix A.1 implementation detail);
//     the decoder sees the same [I; C; T; EOS] either way. Queries carry
//     the instruction, documents none (Appendix A.3), so a document's C
//     comes first, after the BOS when the tokenizer adds one.
//   - Attention is the decoder's own setting (Model.Causal): the paper
//     keeps the pretrained causal mask, which is decoder.New's default.
//
// Invariants: a step's texts and its tokenised batch describe the same
// sequences in the same order (Q queries, then Q·G documents); the batch
// is right-padded with EOS as each sequence's last real token; C's
// position is within the real tokens, before EOS. Params are the MLP's,
// then the decoder's (with LoRA when enabled), then a trainable encoder's
// (one with a Params method). The gradients — MLP, decoder, and the
// encoder's vectors handed to Encoder.Backward — are checked against
// PyTorch autograd on transformers' LlamaModel
// (TestCausal2VecGradientsMatchPyTorch, tools/causal2vec_torch_ref.py). A
// Technique is not safe for concurrent use: it keeps the last forward's
// activations, as the decoder does.
package causal2vec

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// Config sets up the technique.
type Config struct {
	// EncoderModel names the small encoder (e.g.
	// "sentence-transformers/all-MiniLM-L6-v2") and EncoderDim is its
	// vector's dimension k, the MLP's input. Every Encode must return it.
	EncoderModel string
	EncoderDim   int
	// DecoderModel names the decoder, for the export's record.
	DecoderModel string
	// Bias adds biases to the MLP's two linear layers (the LLaVA-1.5
	// projector); without, it is Eq. (1) as written.
	Bias bool
	// Seed initialises the MLP.
	Seed uint64
	// QueryPrefix and DocPrefix are how many tokens precede C in every
	// query (the BOS if any, and the instruction's tokens) and in every
	// document (the BOS if any), unless Insert is set.
	QueryPrefix, DocPrefix int
	// Insert, when set, gives C's position in each sequence: the number
	// of its tokens that precede C, given its text, its real token ids
	// (EOS last) and whether it is a query. It must be below len(ids).
	Insert func(text string, ids []int32, query bool) (int, error)
	// EncoderText, when set, maps a sequence's text to the text the
	// encoder sees (e.g. a query without its instruction).
	EncoderText func(text string, query bool) string
}

// Technique is Causal2Vec over a decoder: it implements decoder.Technique.
type Technique struct {
	Cfg   Config
	Model *decoder.Model
	Enc   Encoder
	// Runner runs Model's passes; nil: Model itself, on the CPU.
	Runner decoder.Runner
	mlp    *mlp
}

// trainable is an encoder with parameters of its own (a BERT with LoRA).
type trainable interface {
	Params() []*ops.Param
	ZeroGrad()
}

// New wraps a decoder (LoRA already enabled or not) and an encoder with a
// freshly initialised MLP.
func New(m *decoder.Model, enc Encoder, cfg Config) (*Technique, error) {
	switch {
	case m == nil:
		return nil, errors.New("causal2vec: no decoder model")
	case enc == nil:
		return nil, errors.New("causal2vec: no encoder")
	case cfg.EncoderDim <= 0:
		return nil, fmt.Errorf("causal2vec: encoder dimension %d (want the encoder's vector size, > 0)", cfg.EncoderDim)
	case cfg.QueryPrefix < 0 || cfg.DocPrefix < 0:
		return nil, fmt.Errorf("causal2vec: query prefix %d and document prefix %d must not be negative", cfg.QueryPrefix, cfg.DocPrefix)
	}
	return &Technique{Cfg: cfg, Model: m, Enc: enc, mlp: newMLP(cfg.EncoderDim, m.Cfg.HiddenSize, cfg.Bias, cfg.Seed)}, nil
}

// Dim is the embedding's dimension, twice the decoder's hidden size.
func (t *Technique) Dim() int { return 2 * t.Model.Cfg.HiddenSize }

// MLPParams are the MLP's parameters: W1, (b1,) W2, (b2).
func (t *Technique) MLPParams() []*ops.Param { return t.mlp.params }

// Params are the MLP's parameters, then the decoder's, then a trainable
// encoder's.
func (t *Technique) Params() []*ops.Param {
	ps := append([]*ops.Param(nil), t.mlp.params...)
	ps = append(ps, t.Model.Params...)
	if te, ok := t.Enc.(trainable); ok {
		ps = append(ps, te.Params()...)
	}
	return ps
}

// ZeroGrad clears the MLP's, the decoder's and a trainable encoder's
// gradients.
func (t *Technique) ZeroGrad() {
	for _, p := range t.mlp.params {
		clear(p.G)
	}
	t.Model.ZeroGrad()
	if te, ok := t.Enc.(trainable); ok {
		te.ZeroGrad()
	}
}

func (t *Technique) runner() decoder.Runner { return t.Model.RunnerOr(t.Runner) }

func (t *Technique) threads() int {
	if t.Model.Threads > 0 {
		return t.Model.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// pass is one forward's state for the backward.
type pass struct {
	N, T int     // sequences, and their padded length with C
	pos  []int   // C's row in each sequence
	eos  []int   // EOS's row in each sequence
	ids  []int32 // N×T token ids of the decoder input; −1 at C and padding
	acts *decoder.Acts
	emb  []float32 // N×2d: [h_C; h_EOS]
}

// forward encodes the texts, builds the decoder input with C inserted and
// pools [h_C; h_EOS]. The first nq sequences are queries.
func (t *Technique) forward(texts []string, b *decoder.Batch, nq int) (*pass, error) {
	d, vocab := t.Model.Cfg.HiddenSize, t.Model.Cfg.VocabSize
	if len(texts) == 0 {
		return nil, errors.New("causal2vec: no texts")
	}
	if b == nil {
		return nil, errors.New("causal2vec: no token batch")
	}
	if b.Inputs != nil {
		return nil, errors.New("causal2vec: the token batch already has input embeddings (want token ids: the technique builds the inputs)")
	}
	if b.N != len(texts) {
		return nil, fmt.Errorf("causal2vec: %d texts but %d tokenised sequences", len(texts), b.N)
	}
	N, T := b.N, b.T
	if T <= 0 || len(b.IDs) != N*T || len(b.Mask) != N*T {
		return nil, fmt.Errorf("causal2vec: batch shape N=%d T=%d does not match its %d ids, %d mask values", N, T, len(b.IDs), len(b.Mask))
	}
	p := &pass{N: N, T: T + 1, pos: make([]int, N), eos: make([]int, N), ids: make([]int32, N*(T+1))}
	lens := make([]int, N)
	for n := 0; n < N; n++ {
		L := 0
		for L < T && b.Mask[n*T+L] == 1 {
			L++
		}
		for i := L; i < T; i++ {
			if b.Mask[n*T+i] != 0 {
				return nil, fmt.Errorf("causal2vec: sequence %d, position %d: mask %g (want ones then zeros: right padding only)", n, i, b.Mask[n*T+i])
			}
		}
		if L == 0 {
			return nil, fmt.Errorf("causal2vec: sequence %d has no tokens", n)
		}
		ids := b.IDs[n*T : n*T+L]
		for i, id := range ids {
			if id < 0 || int(id) >= vocab {
				return nil, fmt.Errorf("causal2vec: token id %d at sequence %d, position %d outside the vocabulary of %d", id, n, i, vocab)
			}
		}
		query := n < nq
		pos := t.Cfg.DocPrefix
		if query {
			pos = t.Cfg.QueryPrefix
		}
		if t.Cfg.Insert != nil {
			var err error
			if pos, err = t.Cfg.Insert(texts[n], ids, query); err != nil {
				return nil, fmt.Errorf("causal2vec: sequence %d: contextual token position: %w", n, err)
			}
		}
		if pos < 0 || pos >= L {
			return nil, fmt.Errorf("causal2vec: sequence %d: contextual token after %d tokens, but it has %d (with EOS last; C must come before EOS)", n, pos, L)
		}
		lens[n], p.pos[n], p.eos[n] = L, n*p.T+pos, n*p.T+L
		row := p.ids[n*p.T : (n+1)*p.T]
		for i := range row {
			row[i] = -1
		}
		copy(row, ids[:pos])
		copy(row[pos+1:], ids[pos:])
	}

	etexts := texts
	if t.Cfg.EncoderText != nil {
		etexts = make([]string, N)
		for n, s := range texts {
			etexts[n] = t.Cfg.EncoderText(s, n < nq)
		}
	}
	h, k, err := t.Enc.Encode(etexts)
	if err != nil {
		return nil, fmt.Errorf("causal2vec: encoder: %w", err)
	}
	if k != t.Cfg.EncoderDim {
		return nil, fmt.Errorf("causal2vec: encoder returned %d-dimensional vectors, but the MLP takes %d (Config.EncoderDim)", k, t.Cfg.EncoderDim)
	}
	if len(h) != N*k {
		return nil, fmt.Errorf("causal2vec: encoder returned %d values for %d texts of dimension %d", len(h), N, k)
	}
	c := t.mlp.forward(h, N, t.threads())

	in := &decoder.Batch{N: N, T: p.T, Mask: make([]float32, N*p.T), Inputs: make([]float32, N*p.T*d)}
	for n := 0; n < N; n++ {
		for i := 0; i <= lens[n]; i++ {
			in.Mask[n*p.T+i] = 1
		}
		r := n * p.T
		pos := p.pos[n] - r
		t.Model.EmbedTokens(in.Inputs[r*d:(r+pos)*d], p.ids[r:r+pos])
		copy(in.Inputs[(r+pos)*d:(r+pos+1)*d], c[n*d:(n+1)*d])
		t.Model.EmbedTokens(in.Inputs[(r+pos+1)*d:(r+lens[n]+1)*d], p.ids[r+pos+1:r+lens[n]+1])
	}
	a, err := t.runner().Forward(in)
	if err != nil {
		return nil, fmt.Errorf("causal2vec: decoder: %w", err)
	}
	p.acts = a
	p.emb = make([]float32, N*2*d)
	for n := 0; n < N; n++ {
		copy(p.emb[n*2*d:], a.Hidden[p.pos[n]*d:(p.pos[n]+1)*d])
		copy(p.emb[n*2*d+d:], a.Hidden[p.eos[n]*d:(p.eos[n]+1)*d])
	}
	return p, nil
}

// backward adds every gradient given dEmb = ∂/∂ the embeddings (N×2d, the
// step's scale included) and hands ∂/∂ the encoder's vectors to the
// encoder.
func (t *Technique) backward(p *pass, dEmb []float32) error {
	d := t.Model.Cfg.HiddenSize
	dHidden := make([]float32, p.N*p.T*d)
	for n := 0; n < p.N; n++ {
		dc, de := dHidden[p.pos[n]*d:(p.pos[n]+1)*d], dHidden[p.eos[n]*d:(p.eos[n]+1)*d]
		for i := 0; i < d; i++ {
			dc[i] += dEmb[n*2*d+i]
			de[i] += dEmb[n*2*d+d+i]
		}
	}
	if err := t.runner().Backward(p.acts, dHidden); err != nil {
		return fmt.Errorf("causal2vec: decoder backward: %w", err)
	}
	dIn := p.acts.DInputs
	t.Model.EmbedBackward(p.ids, dIn) // the token rows; C's and padding's ids are −1
	dC := make([]float32, p.N*d)
	for n := 0; n < p.N; n++ {
		copy(dC[n*d:(n+1)*d], dIn[p.pos[n]*d:(p.pos[n]+1)*d])
	}
	if err := t.Enc.Backward(t.mlp.backward(dC)); err != nil {
		return fmt.Errorf("causal2vec: encoder backward: %w", err)
	}
	return nil
}

func checkStep(s *decoder.Step) error {
	switch {
	case s == nil:
		return errors.New("causal2vec: no step")
	case s.Q <= 0 || s.G <= 0:
		return fmt.Errorf("causal2vec: step with %d queries of %d documents each (want both > 0)", s.Q, s.G)
	case len(s.Texts) != s.Q+s.Q*s.G:
		return fmt.Errorf("causal2vec: step has %d texts, want %d queries + %d documents", len(s.Texts), s.Q, s.Q*s.G)
	case s.Teacher != nil && len(s.Teacher) != s.Q*s.G:
		return fmt.Errorf("causal2vec: step has %d teacher scores, want %d", len(s.Teacher), s.Q*s.G)
	}
	return nil
}

// stepPass is a step's texts through the technique: the objective.Pass
// its contrastive loss runs over (embeddings [h_C; h_EOS], Dim() wide).
type stepPass struct {
	t *Technique
	s *decoder.Step
	p *pass // the last Forward's
}

func (sp *stepPass) Forward() ([]float32, error) {
	p, err := sp.t.forward(sp.s.Texts, sp.s.Batch, sp.s.Q)
	if err != nil {
		return nil, err
	}
	sp.p = p
	return p.emb, nil
}

func (sp *stepPass) Backward(dEmb []float32) error {
	if sp.p == nil {
		return errors.New("causal2vec: Backward before Forward")
	}
	return sp.t.backward(sp.p, dEmb)
}

// Grad runs forward and backward for one step (objective.ContrastiveGrad)
// and adds scale × the gradient of its loss to every trainable parameter
// (and hands scale × ∂loss/∂vectors to the encoder's Backward). It returns
// the unscaled loss and its terms; a NaN or infinite loss is returned
// without a backward.
func (t *Technique) Grad(s *decoder.Step, cc objective.ContrastiveConfig, scale float32) (objective.Loss, error) {
	if err := checkStep(s); err != nil {
		return objective.Loss{}, err
	}
	return objective.ContrastiveGrad(&stepPass{t: t, s: s}, len(s.Texts), s.Q, s.G, t.Dim(), s.Teacher, cc, scale)
}

// Eval is Grad's forward only: the loss, and how many queries rank their
// positive above all of their own negatives.
func (t *Technique) Eval(s *decoder.Step, cc objective.ContrastiveConfig) (objective.Loss, error) {
	if err := checkStep(s); err != nil {
		return objective.Loss{}, err
	}
	return objective.ContrastiveForward(&stepPass{t: t, s: s}, len(s.Texts), s.Q, s.G, t.Dim(), s.Teacher, cc)
}

// Embed returns the embeddings [h_C; h_EOS] (len(texts)×Dim()) of texts
// tokenised in b, all queries (C after Config.QueryPrefix tokens) or all
// documents: forward only, for evaluation. They are not normalised.
func (t *Technique) Embed(texts []string, b *decoder.Batch, queries bool) ([]float32, error) {
	nq := 0
	if queries {
		nq = len(texts)
	}
	p, err := t.forward(texts, b, nq)
	if err != nil {
		return nil, err
	}
	return p.emb, nil
}
