package train

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/technique/anchor"
	"github.com/anna-search/anna/internal/train/technique/autoregembed"
	"github.com/anna-search/anna/model"
)

// refusing is an Accelerator that takes no model: what the device path
// does not cover must be refused, naming the option, before a model
// reaches it (or by decoder.Model.DeviceLayout, which cuda.NewDecoder
// calls first).
type refusing struct{}

var errReached = errors.New("the accelerator was reached")

func (refusing) String() string { return "test accelerator" }
func (refusing) TrainEncoder(*model.Config, string, map[string][]float32, []EncoderLoRA) (DeviceEncoder, error) {
	return nil, errReached
}
func (refusing) TrainDecoder(m *decoder.Model) (DeviceDecoder, error) {
	if _, err := m.DeviceLayout(); err != nil {
		return nil, err
	}
	return nil, errReached
}

func TestDeviceRefusals(t *testing.T) {
	bert, llama := tinyCheckpoint(t, false), tinyDecoder(t, "llama")
	tc := testmodels.MiniLMVocab(testmodels.Decoder("llama"))
	tc.TieWordEmbeddings = true // AutoRegEmbed's frozen decoder generates through the LM head
	tied := testmodels.Checkpoint(t, tc, decoder.RandomTensors(tc, 0.02, 7))
	data := writeData(t, 24, false)
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"decoder full reaches it", Config{ModelDir: llama}, errReached.Error()},
		{"autoregembed full reaches it", Config{ModelDir: tied, Technique: autoregembed.Method{Stage: autoregembed.Compression}}, errReached.Error()},
		{"autoregembed reaches it", Config{ModelDir: tied, LoRA: &LoRAConfig{Rank: 2}, Technique: autoregembed.Method{Stage: autoregembed.Compression}}, errReached.Error()},
		{"technique full reaches it", Config{ModelDir: llama, Technique: anchor.Method{}}, errReached.Error()},
		{"anchor reaches it", Config{ModelDir: llama, LoRA: &LoRAConfig{Rank: 2}, Technique: anchor.Method{}}, errReached.Error()},
		{"bert reaches it", Config{ModelDir: bert}, errReached.Error()},
		{"bert lora reaches it", Config{ModelDir: bert, LoRA: &LoRAConfig{Rank: 2}}, errReached.Error()},
		{"decoder lora reaches it", Config{ModelDir: llama, LoRA: &LoRAConfig{Rank: 2}}, errReached.Error()},
		{"decoder head reaches it", Config{ModelDir: llama, LoRA: &LoRAConfig{Rank: 2}, Pooling: PoolLatent, HeadLatents: 2, HeadHeads: 4},
			errReached.Error()},
	} {
		c.cfg.Data, c.cfg.OutDir, c.cfg.Device, c.cfg.NoExport = data, t.TempDir(), refusing{}, true
		if _, err := Run(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.name, c.want, err)
		}
	}
}
