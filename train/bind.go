package train

import (
	"fmt"

	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/decoder"
)

// bind builds what the steps run and where the weights live: the loaded
// model's passes, or cfg.Technique over its decoder; on the host, or
// uploaded to cfg.Device.
func (r *run) bind(tok *tokenizer.Tokenizer, examples []Example) error {
	cfg, src := r.cfg, r.src
	r.tr = &trainer{cfg: cfg, tok: tok, dim: src.config().HiddenSize}
	if cfg.Objective != ObjectiveContrastive {
		r.tr.head = src.bert
	}
	if cfg.Technique != nil {
		t, err := cfg.Technique.New(src.dec, setup(cfg, tok, examples))
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		r.closers = append(r.closers, t.Close)
		r.tr.tech = t
		if cfg.Device == nil {
			r.store = hostStore{t.Params(), t.ZeroGrad}
			return nil
		}
		dt, err := techniqueOnDevice(cfg.Device, t)
		if err != nil {
			return err
		}
		r.closers = append(r.closers, dt.close)
		r.store = dt
		return nil
	}
	if cfg.Device == nil {
		r.store, r.tr.net = src.host(), src.net()
		return nil
	}
	dn, err := onDevice(cfg.Device, src)
	if err != nil {
		return err
	}
	r.closers = append(r.closers, dn.close)
	r.store, r.tr.net = dn, dn
	return nil
}

// setup is what cfg.Technique is built from beside the decoder: the
// run's settings, its tokenizer, and each training query text's
// instruction.
func setup(cfg *Config, tok *tokenizer.Tokenizer, examples []Example) decoder.Setup {
	prompts := map[string]string{}
	for _, e := range examples {
		if e.Prompt != "" {
			prompts[e.Prompt+e.Query] = e.Prompt
		}
	}
	s := decoder.Setup{Tokenizer: tok, Prompts: prompts, ModelDir: cfg.ModelDir, Pooling: cfg.Pooling, Bidirectional: cfg.Bidirectional,
		Recompute: cfg.Recompute, DistillWeight: cfg.DistillWeight, NoExport: cfg.NoExport, Threads: cfg.Threads, Seed: cfg.Seed}
	if cfg.LoRA != nil && cfg.Technique.CopiesDecoder() {
		lc := decoderLoRA(cfg.LoRA)
		s.LoRA = &lc
	}
	return s
}
