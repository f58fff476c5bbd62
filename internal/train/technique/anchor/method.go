package anchor

import (
	"context"
	"errors"
	"fmt"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/export"
)

// Name is the technique's name (train.Config.Technique, annactl train
// --technique).
const Name = "anchor"

// Method is stage I as a training run's technique: Run's loop trains the
// decoder (under LoRA when the run asks) with the reconstruction loss, and
// the export is the decoder's own, for stage II (a plain contrastive run
// from it).
type Method struct {
	// Alpha is the weight of EBQ2D (EBD2Q gets 1 − α): 0 means
	// DefaultAlpha, a negative value α = 0 (the paper's OnlyD2Q).
	Alpha float64
}

var _ decoder.Method = Method{}

// Name is "anchor".
func (Method) Name() string { return Name }

// CopiesDecoder is false: Anchor trains the run's decoder itself.
func (Method) CopiesDecoder() bool { return false }

// New wraps the run's decoder. Stage I has no distillation term: a run
// with a distillation weight is refused.
func (mt Method) New(m *decoder.Model, s decoder.Setup) (decoder.Technique, error) {
	if s.DistillWeight > 0 {
		return nil, errors.New("anchor: stage I reconstructs texts and has no distillation term (drop the distillation weight)")
	}
	alpha := mt.Alpha
	switch {
	case alpha == 0:
		alpha = DefaultAlpha
	case alpha < 0:
		alpha = 0 // the paper's OnlyD2Q
	}
	return New(m, alpha)
}

// Model is the decoder Anchor trains.
func (a *Anchor) Model() *decoder.Model { return a.m }

// UseRunners runs the decoder's passes through up's Runner.
func (a *Anchor) UseRunners(up func(*decoder.Model) (decoder.Runner, error)) error {
	r, err := up(a.m)
	if err != nil {
		return err
	}
	a.Runner = r
	return nil
}

// Save has nothing to write: Anchor's checkpoint is the decoder's.
func (a *Anchor) Save(string) (string, error) { return "", nil }

// Export writes the decoder (decoder.Model.Export).
func (a *Anchor) Export(ctx context.Context, srcDir, outDir string, s export.Settings) (string, string, error) {
	ctx = safe.Ctx(ctx)
	hf, dir, err := a.m.Export(ctx, srcDir, outDir, s, nil, nil)
	if err != nil {
		return "", "", fmt.Errorf("anchor: %w", err)
	}
	return hf, dir, nil
}

// Close releases nothing.
func (a *Anchor) Close() error { return nil }
