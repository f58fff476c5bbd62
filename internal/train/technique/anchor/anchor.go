// Package anchor is stage I of paper 000 (Anchor: training LLMs to be
// better text embedders through bidirectional reconstruction) as a
// decoder.Technique: before contrastive training, the decoder learns to
// reconstruct each side of a (query, positive document) pair from the other
// side's [EOS] embedding.
//
// The paper's Algorithm 1, with f the decoder up to its last hidden state
// (after the final norm, transformers' last_hidden_state), e_X = f(X, EOS)
// at the EOS, and Embed the token embedding:
//
//	EBQ2D: D̂ = lm_head(Dec([e_Q, Embed(D)])),  L_Q2D = CE(D̂, D)
//	EBD2Q: Q̂ = lm_head(Dec([e_D, Embed(Q)])),  L_D2Q = CE(Q̂, Q)
//	L = α·L_Q2D + (1−α)·L_D2Q                  (the paper fixes α = 0.2)
//
// One model does everything: the embedding passes and the generation passes
// share every weight, the LM head is the decoder's own (Model.LMHead: the
// tied input embedding, as SmolLM2, or a frozen lm_head), and the gradient
// flows from the generation loss through the prefix e into the embedding
// pass. The embedding enters the generation pass as it is, as the first
// row of inputs_embeds: the paper has no projection (Algorithm 1 line 4;
// the authors' code concatenates the pooled vector to embed_tokens' rows),
// so this technique adds no parameters and its checkpoint is the decoder's.
//
// Where the paper leaves things open, this package follows the authors'
// published training code (LUMIA-Group/Anchor-Embedding, run_stage_I.py):
//   - Targets: every token of the counterpart's tokenisation except its
//     final EOS (Eq. 3 sums over d_1…d_m, the text without the appended
//     [EOS]; the code sets the EOS labels to −100). The prefix position
//     predicts the first token, as under teacher forcing. The EOS is
//     therefore not fed to the generation pass either: its output would
//     predict nothing, and under causal attention it changes nothing
//     before it, so [e, t_1…t_{L−1}] (L positions, where the sequence had
//     L tokens with its EOS) gives exactly the code's loss with one
//     position less and never exceeds the step's sequence length.
//   - Reduction: each direction's cross-entropy is the mean over all of its
//     target tokens in the batch (PyTorch's CrossEntropyLoss default, as the
//     code), not Eq. 3's per-pair sum.
//   - Positions: the prefix is position 0 and the tokens 1…L−1, contiguous
//     (transformers' positions for a right-padded batch; the code's left
//     padding shifts real tokens' positions by the padding, an artefact this
//     package does not copy).
//   - Template and instructions: the texts are the step's tokenisation as
//     the trainer makes it for stage II (instructions on the queries, EOS
//     appended); the code wraps both sides in the model's chat template,
//     which is a data choice outside this package.
//   - Data: only the (query, positive) pairs of a step are used (the paper's
//     appendix A.2); the negatives are ignored.
//   - Attention must be causal: generation by teacher forcing under
//     bidirectional attention would see its targets.
//   - Pooling is the EOS's hidden state by definition (Eq. 1); a trainable
//     pooling head the model may have (EnableHead) takes no part and gets
//     no gradient.
//
// A decoder.Model keeps one activation workspace, so a gradient step runs
// the embedding pass forward (to get e), the generation pass forward and
// backward (to get ∂L/∂e from ∂L/∂inputs_embeds at position 0, and the
// token rows' share of the embedding gradient), then the embedding pass
// forward again (bit-identical: same inputs, same weights) and backward
// from ∂L/∂e at each EOS: one extra forward of the embedding pass instead
// of a second workspace. The gradients are exact, checked against PyTorch
// autograd on transformers' LlamaForCausalLM / Qwen2ForCausalLM
// (TestAnchorGradientsMatchPyTorch, tools/anchor_torch_ref.py).
//
// Invariants: the step's batch is token ids, right-padded, every sequence
// ending in the EOS the tokenizer appended; the model's attention is causal.
// Bad input (no queries, a batch that is not Q + Q·G sequences, embeddings
// instead of ids, left padding, a direction with nothing to reconstruct) is
// an error. An Anchor is not safe for concurrent use (nor is its Model).
package anchor

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// DefaultAlpha is the paper's weight of EBQ2D (the weight of EBD2Q is
// 1 − α): "we fix it to 0.2".
const DefaultAlpha = 0.2

// Anchor trains a decoder with the stage I bidirectional reconstruction
// loss. It implements decoder.Technique.
type Anchor struct {
	m     *decoder.Model
	alpha float64
	// Runner runs m's passes; nil: m itself, on the CPU.
	Runner decoder.Runner
	// q2d and d2q are the last step's two cross-entropies (0 for a
	// direction whose weight is 0, which is not computed).
	q2d, d2q float64
}

var _ decoder.Technique = (*Anchor)(nil)

// New wraps a decoder (LoRA already enabled when wanted) for stage I with
// α, the weight of EBQ2D, in [0, 1]; α = 0 is the paper's "OnlyD2Q"
// ablation and α = 1 its "OnlyQ2D".
func New(m *decoder.Model, alpha float64) (*Anchor, error) {
	if m == nil {
		return nil, errors.New("anchor: no decoder model")
	}
	if !(alpha >= 0 && alpha <= 1) {
		return nil, fmt.Errorf("anchor: alpha %g outside [0, 1] (the weight of EBQ2D; the paper's is %g)", alpha, DefaultAlpha)
	}
	return &Anchor{m: m, alpha: alpha}, nil
}

// Params are the decoder's parameters (with its LoRA factors when enabled):
// Anchor adds none.
func (a *Anchor) Params() []*ops.Param { return a.m.Params }

// ZeroGrad clears every trainable parameter's gradient.
func (a *Anchor) ZeroGrad() { a.m.ZeroGrad() }

// Losses are the last Grad's or Eval's two cross-entropies, before the
// weights α and 1 − α (a direction of weight 0 is not computed: 0).
func (a *Anchor) Losses() (q2d, d2q float64) { return a.q2d, a.d2q }

// Grad adds scale × the gradient of the stage I loss to the decoder's
// parameters and returns the unscaled loss. cc is not used (stage I has no
// contrastive term). A NaN or infinite loss is returned without the
// backward passes (the trainer stops on it).
func (a *Anchor) Grad(s *decoder.Step, _ objective.ContrastiveConfig, scale float32) (objective.Loss, error) {
	loss, err := a.run(s, scale, true)
	return objective.Loss{Value: loss}, err
}

// Eval is Grad's forward only: the stage I loss, and 0 correct (the
// objective does not rank).
func (a *Anchor) Eval(s *decoder.Step, _ objective.ContrastiveConfig) (objective.Loss, error) {
	loss, err := a.run(s, 0, false)
	return objective.Loss{Value: loss}, err
}

func (a *Anchor) threads() int {
	if a.m.Threads > 0 {
		return a.m.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// direction is one reconstruction task over a step's Q pairs.
type direction struct {
	name   string
	weight float64
	src    []int // per pair, the step row whose EOS embedding is the prefix
	tgt    []int // per pair, the step row that is reconstructed
}

// plan is one step laid out as the two passes' batches.
type plan struct {
	enc     *decoder.Batch // the sequences whose EOS embedding is a prefix
	encLens []int
	gen     *decoder.Batch // prefix + counterpart tokens, direction by direction
	genLens []int
	genIDs  []int32 // gen's token ids, −1 at the prefix and padding
	genSrc  []int   // per gen row, its prefix's enc row
	targets []int32 // per gen position, the token it predicts, or −1
	dirs    []direction
	dirRows [][2]int // per direction, its gen rows [lo, hi)
}

// layout checks a step and builds its plan.
func (a *Anchor) layout(s *decoder.Step) (*plan, error) {
	switch {
	case s == nil || s.Batch == nil:
		return nil, errors.New("anchor: step without a token batch")
	case s.Q <= 0:
		return nil, fmt.Errorf("anchor: step with %d queries (want at least one query and its positive)", s.Q)
	case s.G <= 0:
		return nil, fmt.Errorf("anchor: step with groups of %d documents (want at least the positive)", s.G)
	}
	b, Q, G := s.Batch, s.Q, s.G
	if b.N != Q+Q*G {
		return nil, fmt.Errorf("anchor: batch of %d sequences, want %d queries + %d×%d documents = %d", b.N, Q, Q, G, Q+Q*G)
	}
	if s.Texts != nil && len(s.Texts) != b.N {
		return nil, fmt.Errorf("anchor: %d texts for a batch of %d sequences", len(s.Texts), b.N)
	}
	if b.Inputs != nil || len(b.IDs) != b.N*b.T || len(b.Mask) != b.N*b.T || b.T <= 0 {
		return nil, fmt.Errorf("anchor: the step's batch must be N×T token ids and mask (N=%d T=%d, %d ids, %d mask values, input embeddings given: %v)",
			b.N, b.T, len(b.IDs), len(b.Mask), b.Inputs != nil)
	}
	if !a.m.Causal {
		return nil, errors.New("anchor: the decoder's attention is bidirectional; stage I generates by teacher forcing and needs causal attention")
	}
	lens, err := decoder.RightPadded(b.Mask, b.N, b.T)
	if err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	for i, id := range b.IDs {
		if id < 0 || int(id) >= a.m.Cfg.VocabSize {
			return nil, fmt.Errorf("anchor: token id %d at sequence %d, position %d outside the vocabulary of %d", id, i/b.T, i%b.T, a.m.Cfg.VocabSize)
		}
	}
	queries, positives := make([]int, Q), make([]int, Q)
	for q := range Q {
		queries[q], positives[q] = q, Q+q*G
	}
	p := &plan{}
	for _, d := range []direction{
		{"EBQ2D (query embedding → document)", a.alpha, queries, positives},
		{"EBD2Q (document embedding → query)", 1 - a.alpha, positives, queries},
	} {
		p.dirs = append(p.dirs, d)
		if d.weight == 0 { // not computed: no rows
			continue
		}
		targets := 0
		for _, r := range d.tgt {
			targets += lens[r] - 1
		}
		if targets == 0 {
			return nil, fmt.Errorf("anchor: %s has nothing to reconstruct: every target text is only its EOS", d.name)
		}
	}

	// The embedding pass: each prefix source once, trimmed to its longest.
	C := a.m.Cfg.HiddenSize
	encRow := map[int]int{}
	var encSrc []int
	for _, d := range p.dirs {
		if d.weight == 0 {
			continue
		}
		for _, r := range d.src {
			if _, ok := encRow[r]; !ok {
				encRow[r] = len(encSrc)
				encSrc = append(encSrc, r)
			}
		}
	}
	Te := 0
	for _, r := range encSrc {
		Te = max(Te, lens[r])
	}
	p.enc = &decoder.Batch{N: len(encSrc), T: Te, IDs: make([]int32, len(encSrc)*Te), Mask: make([]float32, len(encSrc)*Te)}
	for i, r := range encSrc {
		copy(p.enc.IDs[i*Te:(i+1)*Te], b.IDs[r*b.T:r*b.T+Te])
		for t := range lens[r] {
			p.enc.Mask[i*Te+t] = 1
		}
		p.encLens = append(p.encLens, lens[r])
	}

	// The generation pass: row = [e_src, tgt's tokens before its EOS].
	Tg, Ng := 0, 0
	p.dirRows = make([][2]int, len(p.dirs))
	for i, d := range p.dirs {
		lo := Ng
		if d.weight != 0 {
			for _, r := range d.tgt {
				Tg = max(Tg, lens[r])
			}
			Ng += Q
		}
		p.dirRows[i] = [2]int{lo, Ng}
	}
	p.gen = &decoder.Batch{N: Ng, T: Tg, Mask: make([]float32, Ng*Tg), Inputs: make([]float32, Ng*Tg*C)}
	p.genIDs, p.targets = make([]int32, Ng*Tg), make([]int32, Ng*Tg)
	for i := range p.genIDs {
		p.genIDs[i], p.targets[i] = -1, -1
	}
	for i, d := range p.dirs {
		if d.weight == 0 {
			continue
		}
		for q := range Q {
			g, r := p.dirRows[i][0]+q, d.tgt[q]
			L := lens[r]
			p.genSrc = append(p.genSrc, encRow[d.src[q]])
			p.genLens = append(p.genLens, L)
			ids := b.IDs[r*b.T : r*b.T+L]
			for t := range L {
				p.gen.Mask[g*Tg+t] = 1
				if t > 0 {
					p.genIDs[g*Tg+t] = ids[t-1] // position t holds token t−1
				}
				if t < L-1 {
					p.targets[g*Tg+t] = ids[t] // and predicts token t
				}
			}
		}
	}
	return p, nil
}

// run is Grad (backward) and Eval (not).
func (a *Anchor) run(s *decoder.Step, scale float32, backward bool) (float64, error) {
	p, err := a.layout(s)
	if err != nil {
		return 0, err
	}
	m, C, th := a.m, a.m.Cfg.HiddenSize, a.threads()
	run := m.RunnerOr(a.Runner)
	V := m.Cfg.VocabSize
	head := m.LMHead()
	a.q2d, a.d2q = 0, 0

	// 1. The embedding pass: e at each source's EOS.
	enc, err := run.Forward(p.enc)
	if err != nil {
		return 0, fmt.Errorf("anchor: embedding pass: %w", err)
	}
	e := make([]float32, p.enc.N*C)
	for i, L := range p.encLens {
		copy(e[i*C:(i+1)*C], enc.Hidden[(i*p.enc.T+L-1)*C:(i*p.enc.T+L)*C])
	}

	// 2. The generation pass, conditioned on e.
	g, Tg := p.gen, p.gen.T
	for r := range g.N {
		copy(g.Inputs[r*Tg*C:], e[p.genSrc[r]*C:(p.genSrc[r]+1)*C])
		L := p.genLens[r]
		m.EmbedTokens(g.Inputs[(r*Tg+1)*C:(r*Tg+L)*C], p.genIDs[r*Tg+1:r*Tg+L])
	}
	gen, err := run.Forward(g)
	if err != nil {
		return 0, fmt.Errorf("anchor: generation pass: %w", err)
	}
	dH := make([]float32, len(gen.Hidden))
	var dW []float32
	if backward {
		dW = head.Grad() // nil when the head is frozen (LoRA, an untied lm_head)
	}
	var loss float64
	for i, d := range p.dirs {
		lo, hi := p.dirRows[i][0], p.dirRows[i][1]
		if lo == hi {
			continue
		}
		l, _ := ops.LMHeadCrossEntropy(dH[lo*Tg*C:hi*Tg*C], dW, gen.Hidden[lo*Tg*C:hi*Tg*C], head.W,
			p.targets[lo*Tg:hi*Tg], (hi-lo)*Tg, C, V, float32(d.weight)*scale, th)
		if i == 0 {
			a.q2d = l
		} else {
			a.d2q = l
		}
		loss += d.weight * l
	}
	if !backward || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, nil
	}
	if err := run.Backward(gen, dH); err != nil {
		return 0, fmt.Errorf("anchor: generation pass backward: %w", err)
	}
	// The token rows' share of ∂L/∂inputs_embeds goes to the embedding;
	// the prefix rows' is ∂L/∂e.
	m.EmbedBackward(p.genIDs, gen.DInputs)
	de := make([]float32, len(e))
	for r := range g.N {
		dst := de[p.genSrc[r]*C : (p.genSrc[r]+1)*C]
		for c, v := range gen.DInputs[r*Tg*C : r*Tg*C+C] {
			dst[c] += v
		}
	}

	// 3. The embedding pass again (the generation pass overwrote its
	// activations) and its backward from ∂L/∂e at each EOS.
	enc, err = run.Forward(p.enc)
	if err != nil {
		return 0, fmt.Errorf("anchor: embedding pass: %w", err)
	}
	dHe := make([]float32, len(enc.Hidden))
	for i, L := range p.encLens {
		copy(dHe[(i*p.enc.T+L-1)*C:(i*p.enc.T+L)*C], de[i*C:(i+1)*C])
	}
	if err := run.Backward(enc, dHe); err != nil {
		return 0, fmt.Errorf("anchor: embedding pass backward: %w", err)
	}
	return loss, nil
}
