// Package autoregembed is AutoRegEmbed (paper 001: information compression
// and conditional distribution alignment) as a decoder.Technique.
//
// A text is encoded by appending k memory tokens (new trainable
// embeddings, k = 5 by default as in the paper's Appendix A) to
// Prefix + text + instruction and running the trainable decoder E (full or
// LoRA) over the input embeddings; the last hidden states of the memory
// tokens are the text's compressed vectors e = (e_1 … e_k). A frozen
// decoder D (the base LLM with its language-model head: a separate
// decoder.Model whose every parameter is frozen, so it backpropagates to
// its input embeddings only) reads [e_1 … e_k, target tokens] as input
// embeddings and scores the target autoregressively:
// log p(d | e) = Σ_t log p(d_t | d_<t, e) over the target's tokens and EOS.
//
// Stage 1 (Compression, §3.2): each query (context plus its instruction)
// is compressed and D must reconstruct the group's first document (the
// target); the loss is the token-level cross-entropy averaged over every
// target token of the batch (the released code's CrossEntropyLoss).
//
// Stage 2 (Alignment, §3.3, Eq. 2): with e_q = E(q, I_next), e_d+ =
// E(d+, I_self) and a frozen reference encoder (E as it was when stage 2
// began, with its memory tokens) giving log p_ref,
//
//	S1(q,d+)     = −σ(β |log p(d+|e_q) − log p(d+|e_d+)|)
//	S2(d+,d−;q)  = −σ(β [(log p(d+|e_q) − log p_ref(d+|e_q)) − (log p(d−|e_q) − log p_ref(d−|e_q))])
//	L            = mean_q −log( e^{S1/τ} / (e^{S1/τ} + Σ_{d−} e^{S2/τ}) )
//
// over each query's own G−1 negatives (no in-batch negatives: the paper's
// point is one comparison per negative, not per batch). Log-likelihoods are
// sums over the target's tokens (the released code's _get_batch_logps with
// average_log_prob False); the paper's normalisation for length is the
// division by p_ref, not a division by the length.
//
// At inference (Embed) a text's embedding is the mean of its k compressed
// vectors, L2-normalised (the released eval_autoregembed.py), queries with
// I_next and documents with I_self; similarity is the inner product.
//
// Where the paper leaves things open, or the released code differs:
//   - Memory tokens are new vocabulary entries in the released code
//     (<EMBED0>…, resize_token_embeddings): here a k×C parameter
//     "autoregembed.memory", drawn per dimension from the normal with the
//     embedding table's mean and variance (transformers' mean resizing with
//     a diagonal covariance), or given (Config.Memory: stage 2 starts from
//     stage 1's). They train in full fine-tuning as in the paper's runs;
//     under LoRA they train too (peft would leave the new rows at their
//     initial values, which the paper never does).
//   - The sign of the reference term: Eq. 2 subtracts β·log(p_ref(d+)/p_ref(d−));
//     the released trainer adds it. This follows the paper.
//   - p_ref is computed each step by the frozen reference encoder (the
//     released code precomputes it offline over the data set). The
//     reference is what New is given, so a resumed stage 2 is built from
//     the checkpoint and memory stage 2 started from, then its Params
//     restored.
//   - The stage-2 decoder D is the base LLM (the released script's
//     decoder_name_or_path), while E starts from stage 1's result: New takes
//     both checkpoints.
//   - τ is Config.Temperature, else the trainer's ContrastiveConfig
//     temperature, else 0.05 (Appendix A; the released script uses 0.1);
//     β defaults to 0.1.
//   - Templates follow the released code: encoder input Prefix (the BOS
//     id) + text + instruction tokens (the caller tokenises "\n" + I + "\n")
//   - memory; target = text tokens + EOS, the text's EOS from the
//     tokenizer stripped first. In stage 1 the per-example instruction is
//     part of the query text (the caller writes "context\ninstruction").
//   - Eval's "correct" counts queries whose positive has the highest
//     per-token log-likelihood log p(d|e_q)/|d| among their group (the
//     loss ranks by the reference-normalised likelihood, which ties at the
//     start of stage 2).
//
// Invariants: the trainable encoder, the frozen decoder and the reference
// encoder are three decoder.Models with their own activation workspaces;
// a step runs the reference, then E forward, then D forward and backward,
// then E backward, so no workspace is overwritten before its backward.
// The frozen models never share weight memory with a trainable weight
// (under full fine-tuning they hold copies). Params are the memory tokens,
// then E's parameters (the frozen ones flagged); D and the reference are
// constants rebuilt from the checkpoints and are not part of them. Bad
// input (a stage, template id or step the method cannot use) is an error
// naming it. A Technique is not safe for concurrent use.
package autoregembed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/model"
)

// Stage is which of the paper's two tasks a Technique trains.
type Stage int

// The stages.
const (
	// Compression is §3.2's information compression.
	Compression Stage = 1
	// Alignment is §3.3's conditional distribution alignment (Eq. 2).
	Alignment Stage = 2
)

func (s Stage) String() string {
	switch s {
	case Compression:
		return "compression"
	case Alignment:
		return "alignment"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// MemoryName is the memory tokens' parameter name.
const MemoryName = "autoregembed.memory"

// Config chooses the stage, the templates and the hyperparameters. Token
// ids are the caller's tokenisation without special tokens.
type Config struct {
	Stage Stage
	// MemoryTokens is k, the number of compressed tokens (default 5).
	MemoryTokens int
	// Memory, when set, are the k×C initial memory-token embeddings
	// (stage 2: stage 1's trained ones); nil draws them (Seed).
	Memory []float32
	// Prefix goes before every encoder input (the released code: the BOS
	// id); may be empty.
	Prefix []int32
	// EOS is the tokenizer's end-of-sequence id: dropped from the end of
	// each text's tokens when there, and closing every target.
	EOS int32
	// QueryInstruction follows a query's text: the tokens of
	// "\n" + I_next + "\n" (stage 1: of "\n", the instruction being in the
	// query text).
	QueryInstruction []int32
	// DocInstruction follows a document's text in stage 2 and at
	// inference: the tokens of "\n" + I_self + "\n".
	DocInstruction []int32
	// Beta is β of Eq. 2 (default 0.1).
	Beta float64
	// Temperature is τ of Eq. 2 (0: the trainer's, else 0.05).
	Temperature float64
	// LoRA trains E with low-rank adapters; nil trains every weight.
	LoRA *decoder.LoRAConfig
	// Threads bounds every op's goroutines (≤ 0: GOMAXPROCS).
	Threads int
	Seed    uint64
}

// Technique trains a decoder with AutoRegEmbed's stage cfg.Stage.
type Technique struct {
	cfg  Config
	k, C int
	enc  *decoder.Model // E, trainable
	dec  *decoder.Model // D, frozen
	ref  *decoder.Model // E as stage 2 began, frozen; nil in stage 1
	mem  *ops.Param     // k×C memory tokens
	// refMem are the memory tokens as stage 2 began.
	refMem []float32
	params []*ops.Param
	// Run runs the models' passes (nil: each model itself, on the CPU).
	Run Runners
}

// Runners run E's, D's and the reference encoder's passes.
type Runners struct{ Enc, Dec, Ref decoder.Runner }

// on is m's Runner: t.Run's for E, D or the reference, else m itself.
func (t *Technique) on(m *decoder.Model) decoder.Runner {
	var r decoder.Runner
	switch m {
	case t.enc:
		r = t.Run.Enc
	case t.dec:
		r = t.Run.Dec
	case t.ref:
		r = t.Run.Ref
	}
	return m.RunnerOr(r)
}

// Decoder is D, the frozen decoder; Reference the frozen reference
// encoder (nil in stage 1). A device trainer uploads them (Run).
func (t *Technique) Decoder() *decoder.Model   { return t.dec }
func (t *Technique) Reference() *decoder.Model { return t.ref }

// New builds the technique over a decoder config, the checkpoint E starts
// from (enc) and the frozen decoder's (dec: the base LLM, with its lm_head
// when the embeddings are untied; nil: enc's, as in stage 1). The trainable
// encoder keeps enc's data as its weights (training changes them);
// the frozen models copy what they would otherwise share with a trained
// weight.
func New(mc *model.Config, enc, dec map[string]*safetensors.Tensor, c Config) (*Technique, error) {
	if c.Stage != Compression && c.Stage != Alignment {
		return nil, fmt.Errorf("autoregembed: stage %d unknown (want %d, compression, or %d, alignment)", int(c.Stage), Compression, Alignment)
	}
	if c.MemoryTokens == 0 {
		c.MemoryTokens = 5
	}
	if c.Beta == 0 {
		c.Beta = 0.1
	}
	switch {
	case c.MemoryTokens < 0:
		return nil, fmt.Errorf("autoregembed: %d memory tokens (want at least 1)", c.MemoryTokens)
	case c.Beta < 0 || math.IsNaN(c.Beta) || math.IsInf(c.Beta, 0):
		return nil, fmt.Errorf("autoregembed: beta %g (want a positive number)", c.Beta)
	case c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0):
		return nil, fmt.Errorf("autoregembed: temperature %g (want a positive number, or 0 for the trainer's)", c.Temperature)
	case enc == nil:
		return nil, errors.New("autoregembed: no encoder checkpoint")
	}
	if mc == nil {
		return nil, errors.New("autoregembed: no model config")
	}
	V := mc.VocabSize
	check := func(what string, ids []int32) error {
		for i, id := range ids {
			if id < 0 || int(id) >= V {
				return fmt.Errorf("autoregembed: %s token %d is id %d, outside the vocabulary of %d", what, i, id, V)
			}
		}
		return nil
	}
	for _, e := range []error{check("prefix", c.Prefix), check("query instruction", c.QueryInstruction),
		check("document instruction", c.DocInstruction), check("EOS", []int32{c.EOS})} {
		if e != nil {
			return nil, e
		}
	}
	t := &Technique{cfg: c, k: c.MemoryTokens, C: mc.HiddenSize}
	var err error
	if t.enc, err = decoder.New(mc, enc); err != nil {
		return nil, fmt.Errorf("autoregembed: encoder: %w", err)
	}
	t.enc.Threads = c.Threads
	// The frozen models' weights: under LoRA E's base weights stay as they
	// are and can be shared; under full fine-tuning they are copied.
	base := enc
	if c.LoRA == nil {
		base = cloneTensors(enc)
	}
	decTensors := base
	if dec != nil {
		decTensors = dec
		if c.LoRA == nil && sharesData(enc, dec) {
			decTensors = cloneTensors(dec)
		}
	}
	if t.dec, err = frozenModel(mc, decTensors); err != nil {
		return nil, fmt.Errorf("autoregembed: frozen decoder: %w", err)
	}
	t.dec.Causal, t.dec.Threads = true, c.Threads // a language model
	if !mc.TieWordEmbeddings && t.dec.LMHead() == t.dec.Param(embedName(t.dec)) {
		return nil, fmt.Errorf("autoregembed: frozen decoder: the config does not tie the word embeddings and the checkpoint has no lm_head.weight: the decoder has no language-model head")
	}
	if c.Stage == Alignment {
		if t.ref, err = frozenModel(mc, base); err != nil {
			return nil, fmt.Errorf("autoregembed: reference encoder: %w", err)
		}
		t.ref.Threads = c.Threads
	}
	if c.LoRA != nil {
		if err := t.enc.EnableLoRA(*c.LoRA, c.Seed); err != nil {
			return nil, fmt.Errorf("autoregembed: %w", err)
		}
	}
	t.mem = &ops.Param{Name: MemoryName, Shape: []int{t.k, t.C}, W: make([]float32, t.k*t.C), G: make([]float32, t.k*t.C)}
	if c.Memory != nil {
		if len(c.Memory) != t.k*t.C {
			return nil, fmt.Errorf("autoregembed: %d memory values, want %d tokens × %d", len(c.Memory), t.k, t.C)
		}
		copy(t.mem.W, c.Memory)
	} else {
		drawMemory(t.mem.W, t.enc.Param(embedName(t.enc)).W, t.k, t.C, c.Seed)
	}
	t.refMem = append([]float32(nil), t.mem.W...)
	t.params = append([]*ops.Param{t.mem}, t.enc.Params...)
	return t, nil
}

func embedName(m *decoder.Model) string {
	if m.Param("model.embed_tokens.weight") != nil {
		return "model.embed_tokens.weight"
	}
	return "embed_tokens.weight"
}

// frozenModel builds a decoder.Model over ts with every parameter frozen
// (and no gradient buffers).
func frozenModel(mc *model.Config, ts map[string]*safetensors.Tensor) (*decoder.Model, error) {
	m, err := decoder.New(mc, ts)
	if err != nil {
		return nil, err
	}
	for _, p := range m.Params {
		p.Frozen, p.G = true, nil
	}
	return m, nil
}

func cloneTensors(ts map[string]*safetensors.Tensor) map[string]*safetensors.Tensor {
	out := make(map[string]*safetensors.Tensor, len(ts))
	for n, t := range ts {
		c := *t
		c.Shape = append([]int(nil), t.Shape...)
		c.Data = append([]float32(nil), t.Data...)
		out[n] = &c
	}
	return out
}

// sharesData reports whether a and b hold any tensor with the same data.
func sharesData(a, b map[string]*safetensors.Tensor) bool {
	for n, t := range a {
		if u, ok := b[n]; ok && len(t.Data) > 0 && len(u.Data) > 0 && &t.Data[0] == &u.Data[0] {
			return true
		}
	}
	return false
}

// drawMemory fills mem (k×C) from the normal with the embedding table's
// per-dimension mean and standard deviation.
func drawMemory(mem, table []float32, k, C int, seed uint64) {
	V := len(table) / C
	mean, sq := make([]float64, C), make([]float64, C)
	for v := 0; v < V; v++ {
		for c, x := range table[v*C : v*C+C] {
			mean[c] += float64(x)
			sq[c] += float64(x) * float64(x)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0xa0e))
	for c := range mean {
		mean[c] /= float64(V)
		sd := math.Sqrt(math.Max(sq[c]/float64(V)-mean[c]*mean[c], 0))
		for j := 0; j < k; j++ {
			mem[j*C+c] = float32(mean[c] + sd*rng.NormFloat64())
		}
	}
}

// Params are the memory tokens, then the encoder's parameters (frozen ones
// flagged): the checkpoint and optimizer order.
func (t *Technique) Params() []*ops.Param { return t.params }

// ZeroGrad clears the trainable gradients.
func (t *Technique) ZeroGrad() {
	clear(t.mem.G)
	t.enc.ZeroGrad()
}

// Encoder is the trainable decoder E (for its settings, and its weights
// with LoRA merged: Tensors).
func (t *Technique) Encoder() *decoder.Model { return t.enc }

// Memory is the memory tokens' parameter (k×C).
func (t *Technique) Memory() *ops.Param { return t.mem }

// Role chooses the instruction an embedded text gets.
type Role int

// The roles.
const (
	Query    Role = iota // QueryInstruction (I_next)
	Document             // DocInstruction (I_self)
)

// Embed returns the inference embedding of b's texts (tokenised as a
// Step's, right-padded, EOS appended): the mean of each text's k
// compressed vectors, L2-normalised, N×C. Forward only.
func (t *Technique) Embed(b *decoder.Batch, role Role) ([]float32, error) {
	var instr []int32
	switch role {
	case Query:
		instr = t.cfg.QueryInstruction
	case Document:
		instr = t.cfg.DocInstruction
	default:
		return nil, fmt.Errorf("autoregembed: role %d unknown (want Query or Document)", int(role))
	}
	texts, err := t.texts(b)
	if err != nil {
		return nil, err
	}
	instrs := make([][]int32, len(texts))
	for i := range instrs {
		instrs[i] = instr
	}
	eb := t.encoderBatch(t.enc, t.mem.W, texts, instrs)
	a, err := t.on(t.enc).Forward(eb.b)
	if err != nil {
		return nil, fmt.Errorf("autoregembed: encoder: %w", err)
	}
	e := eb.compressed(a, t.k, t.C)
	out := make([]float32, len(texts)*t.C)
	for n := range texts {
		o := out[n*t.C : n*t.C+t.C]
		for j := 0; j < t.k; j++ {
			for c, v := range e[(n*t.k+j)*t.C : (n*t.k+j+1)*t.C] {
				o[c] += v
			}
		}
		var ss float64
		for c := range o {
			o[c] /= float32(t.k)
			ss += float64(o[c]) * float64(o[c])
		}
		if ss > 0 {
			inv := float32(1 / math.Sqrt(ss))
			for c := range o {
				o[c] *= inv
			}
		}
	}
	return out, nil
}
