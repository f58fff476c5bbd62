package causal2vec

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// ContextTrain trains the context encoder together with the decoder
// instead of keeping it frozen (paper 004 leaves the choice open; the
// frozen encoder is the default): a BERT-family checkpoint run by
// train/bert's forward and backward on every step's texts, pooled and
// normalised as it is served, with the gradient that the technique hands
// back for its vectors. The export writes it (LoRA merged) as an anna
// model in OUT/context/model and pairs the decoder with that model.
type ContextTrain struct {
	// Checkpoint is the encoder's Hugging Face checkpoint directory
	// (config.json, *.safetensors, tokenizer.json).
	Checkpoint string
	// LoRA adapts the encoder with low-rank factors (alpha ≤ 0: 2×rank);
	// nil trains every weight.
	LoRA *bert.LoRAConfig
	// Pooling (mean or cls), Normalize and MaxLength are how the encoder
	// is served (its anna manifest's), so that training sees the vectors
	// inference will.
	Pooling   string
	Normalize bool
	MaxLength int
}

// ContextPrefix starts the trained context encoder's parameter names in
// checkpoints ("context." + its Hugging Face name).
const ContextPrefix = "context."

// ContextEncoder is the Encoder over a trainable BERT that Method.Train
// runs. Its Params are the model's own under ContextPrefix names, so that
// they cannot collide with the decoder's in a checkpoint; they share the
// model's weights and gradients. Encode keeps what Backward needs: the
// activations of its forward, the pooled vectors' unit rows and norms. A
// ContextEncoder is not safe for concurrent use.
type ContextEncoder struct {
	m      *bert.Model
	tok    *tokenizer.Tokenizer
	cfg    ContextTrain
	params []*ops.Param

	acts  *bert.Acts
	unit  []float32 // the last Encode's normalised vectors (Normalize)
	norms []float64
}

// NewContextEncoder loads ct's checkpoint (LoRA initialised from seed,
// threads goroutines per op) as Method.Train does. Close releases its
// tokenizer.
func NewContextEncoder(ct ContextTrain, threads int, seed uint64) (*ContextEncoder, error) {
	if ct.Pooling != bert.PoolMean && ct.Pooling != bert.PoolCLS {
		return nil, fmt.Errorf("causal2vec: context encoder pooling %q (want mean or cls, as it is served)", ct.Pooling)
	}
	if ct.MaxLength <= 0 {
		return nil, fmt.Errorf("causal2vec: context encoder max length %d (want the length it is served at, > 0)", ct.MaxLength)
	}
	if mc, err := model.LoadConfig(ct.Checkpoint); err == nil && mc.IsDecoder() {
		return nil, fmt.Errorf("causal2vec: context encoder %s is a %s decoder; Causal2Vec's is a small bidirectional encoder", ct.Checkpoint, mc.ModelType)
	}
	m, err := bert.LoadModel(ct.Checkpoint, false, seed)
	if err != nil {
		return nil, fmt.Errorf("causal2vec: context encoder: %w", err)
	}
	m.Threads = threads
	if ct.LoRA != nil {
		lc := *ct.LoRA
		if lc.Alpha <= 0 {
			lc.Alpha = float64(2 * lc.Rank)
		}
		if err := m.EnableLoRA(lc, seed^0xc0de); err != nil {
			return nil, fmt.Errorf("causal2vec: context encoder: %w", err)
		}
	}
	tok, err := tokenizer.Load(filepath.Join(ct.Checkpoint, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("causal2vec: context encoder: %w", err)
	}
	e := &ContextEncoder{m: m, tok: tok, cfg: ct}
	for _, p := range m.Params {
		if !p.Frozen {
			q := *p
			q.Name = ContextPrefix + p.Name
			e.params = append(e.params, &q)
		}
	}
	return e, nil
}

// Close closes the encoder's tokenizer.
func (e *ContextEncoder) Close() { e.tok.Close() }

// Dim is the encoder's vector size.
func (e *ContextEncoder) Dim() int { return e.m.Cfg.HiddenSize }

// Params are the encoder's trainable parameters (prefixed names, shared
// weights and gradients).
func (e *ContextEncoder) Params() []*ops.Param { return e.params }

// ZeroGrad clears the encoder's gradients.
func (e *ContextEncoder) ZeroGrad() { e.m.ZeroGrad() }

// Encode runs the encoder on texts (truncated at MaxLength tokens) and
// pools (and normalises) one vector per text.
func (e *ContextEncoder) Encode(texts []string) ([]float32, int, error) {
	a, err := e.m.Forward(bert.PaddedBatch(tokenizer.Pad(e.tok.EncodeBatch(texts, e.cfg.MaxLength), e.tok.PadID())))
	if err != nil {
		return nil, 0, fmt.Errorf("context encoder: %w", err)
	}
	v, err := e.m.Pool(a, e.cfg.Pooling)
	if err != nil {
		return nil, 0, err
	}
	e.acts = a
	C := e.Dim()
	if e.cfg.Normalize {
		e.unit, e.norms = objective.NormalizeRows(v, len(texts), C)
		v = e.unit
	}
	return v, C, nil
}

// Backward adds the encoder's gradient given dVecs = ∂loss/∂ the last
// Encode's vectors.
func (e *ContextEncoder) Backward(dVecs []float32) error {
	if e.acts == nil {
		return fmt.Errorf("context encoder: Backward before Encode")
	}
	a, C := e.acts, e.Dim()
	if len(dVecs) != a.N*C {
		return fmt.Errorf("context encoder: %d gradient values for %d vectors of %d", len(dVecs), a.N, C)
	}
	dPooled := dVecs
	if e.cfg.Normalize {
		g := make([]float64, len(dVecs))
		for i, x := range dVecs {
			g[i] = float64(x)
		}
		dPooled = objective.NormalizeRowsBackward(g, e.unit, e.norms, a.N, C)
	}
	dHidden := make([]float32, a.N*a.T*C)
	e.m.PoolBackward(a, e.cfg.Pooling, dPooled, dHidden)
	return e.m.Backward(a, dHidden)
}

// contextDir is where a run with a trained context encoder exports it
// (hf/ and model/), under its output directory.
const contextDir = "context"

// export writes the trained context encoder (LoRA merged) into
// outDir/context as an anna model served as it was trained (pooling,
// normalisation, length), named name + "-causal2vec" (name "": its
// checkpoint's directory name), and returns the pairing that names it.
func (e *ContextEncoder) export(ctx context.Context, outDir, name string) (*model.ContextModel, error) {
	if name == "" {
		name = filepath.Base(e.cfg.Checkpoint)
	}
	name += "-causal2vec"
	norm := e.cfg.Normalize
	_, dir, err := e.m.Export(ctx, e.cfg.Checkpoint, filepath.Join(outDir, contextDir),
		export.Settings{Name: name, Pooling: e.cfg.Pooling, MaxLength: e.cfg.MaxLength, Normalize: &norm})
	if err != nil {
		return nil, fmt.Errorf("causal2vec: context encoder: %w", err)
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("causal2vec: context encoder: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &model.ContextModel{Name: name, Path: dir, Fingerprint: man.Fingerprint, Dim: man.Dim}, nil
}
