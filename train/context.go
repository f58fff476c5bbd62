package train

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/tokenizer"
	"github.com/anna-search/anna/train/objective"
)

// ContextTrain trains a Causal2Vec run's context encoder together with the
// decoder instead of keeping it frozen (paper 004 leaves the choice open;
// the frozen encoder is the default): a BERT-family checkpoint run by this
// package's own forward and backward on every step's texts, pooled and
// normalised as it is served, with the gradient that the technique hands
// back for its vectors. The export writes it (LoRA merged) as an anna
// model in OutDir/context/model and pairs the decoder with that model.
type ContextTrain struct {
	// Checkpoint is the encoder's Hugging Face checkpoint directory
	// (config.json, *.safetensors, tokenizer.json).
	Checkpoint string
	// LoRA adapts the encoder with low-rank factors; nil trains every
	// weight.
	LoRA *LoRAConfig
	// Pooling (mean or cls), Normalize and MaxLength are how the encoder
	// is served (its anna manifest's), so that training sees the vectors
	// inference will.
	Pooling   string
	Normalize bool
	MaxLength int
}

// contextEncoder is causal2vec.Encoder over a trainable BERT (ContextTrain).
// Its Params are the model's own under "context." names, so that they
// cannot collide with the decoder's in a checkpoint; they share the
// model's weights and gradients. Encode keeps what Backward needs: the
// activations of its forward, the pooled vectors' unit rows and norms.
type contextEncoder struct {
	m      *Model
	tok    *tokenizer.Tokenizer
	cfg    ContextTrain
	params []*Param

	acts  *Acts
	unit  []float32 // the last Encode's normalised vectors (Normalize)
	norms []float64
}

// contextParamPrefix names the context encoder's parameters in checkpoints.
const contextParamPrefix = "context."

func newContextEncoder(ct ContextTrain, threads int, seed uint64) (*contextEncoder, error) {
	if ct.Pooling != PoolMean && ct.Pooling != PoolCLS {
		return nil, fmt.Errorf("train: context encoder pooling %q (want mean or cls, as it is served)", ct.Pooling)
	}
	if ct.MaxLength <= 0 {
		return nil, fmt.Errorf("train: context encoder max length %d (want the length it is served at, > 0)", ct.MaxLength)
	}
	m, err := LoadModel(ct.Checkpoint, false, seed)
	if err != nil {
		return nil, fmt.Errorf("train: context encoder: %w", err)
	}
	if m.Cfg.IsDecoder() {
		return nil, fmt.Errorf("train: context encoder %s is a %s decoder; Causal2Vec's is a small bidirectional encoder", ct.Checkpoint, m.Cfg.ModelType)
	}
	m.Threads = threads
	if ct.LoRA != nil {
		lc := *ct.LoRA
		lc.bertDefaults()
		if err := m.EnableLoRA(lc, seed^0xc0de); err != nil {
			return nil, fmt.Errorf("train: context encoder: %w", err)
		}
	}
	tok, err := tokenizer.Load(filepath.Join(ct.Checkpoint, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("train: context encoder: %w", err)
	}
	e := &contextEncoder{m: m, tok: tok, cfg: ct}
	for _, p := range m.Params {
		if !p.Frozen {
			q := *p
			q.Name = contextParamPrefix + p.Name
			e.params = append(e.params, &q)
		}
	}
	return e, nil
}

func (e *contextEncoder) Close() { e.tok.Close() }

// Dim is the encoder's vector size.
func (e *contextEncoder) Dim() int { return e.m.Cfg.HiddenSize }

// Params are the encoder's trainable parameters (prefixed names, shared
// weights and gradients).
func (e *contextEncoder) Params() []*Param { return e.params }

// ZeroGrad clears the encoder's gradients.
func (e *contextEncoder) ZeroGrad() { e.m.ZeroGrad() }

// Encode runs the encoder on texts (truncated at MaxLength tokens) and
// pools (and normalises) one vector per text.
func (e *contextEncoder) Encode(texts []string) ([]float32, int, error) {
	a, err := e.m.Forward(padBatch(e.tok.EncodeBatch(texts, e.cfg.MaxLength), e.tok.PadID()))
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
func (e *contextEncoder) Backward(dVecs []float32) error {
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
	e.m.Backward(a, dHidden)
	return nil
}

// contextDir is where a Causal2Vec run with a trained context encoder
// exports it (hf/ and model/), under OutDir.
const contextDir = "context"

// exportContext writes the trained context encoder (LoRA merged) into
// OutDir/context as an anna model served as it was trained (pooling,
// normalisation, length), and returns the pairing that names it.
func exportContext(ctx context.Context, e *contextEncoder, cfg Config) (*model.ContextModel, error) {
	name := cfg.ContextEncoderName
	if name == "" {
		name = filepath.Base(e.cfg.Checkpoint)
	}
	name += "-causal2vec"
	norm := e.cfg.Normalize
	_, dir, err := Export(ctx, e.m, e.cfg.Checkpoint, filepath.Join(cfg.OutDir, contextDir),
		ExportSettings{Name: name, Pooling: e.cfg.Pooling, MaxLength: e.cfg.MaxLength, Normalize: &norm})
	if err != nil {
		return nil, fmt.Errorf("train: context encoder: %w", err)
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("train: context encoder: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &model.ContextModel{Name: name, Path: dir, Fingerprint: man.Fingerprint, Dim: man.Dim}, nil
}
