package causal2vec

import (
	"math"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

// tinyPair writes a small random llama decoder and a small random BERT,
// both with the real MiniLM vocabulary and tokenizer.
func tinyPair(t *testing.T) (decoderDir, bertDir string) {
	dc := testmodels.MiniLMVocab(testmodels.Decoder("llama"))
	bc := testmodels.MiniLMVocab(testmodels.BERT())
	return testmodels.Checkpoint(t, dc, decoder.RandomTensors(dc, 0.02, 7)), testmodels.Checkpoint(t, bc, bert.RandomTensors(bc, false, 0.02, 7))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A trained Causal2Vec context encoder (ContextTrain) receives the
// gradient of the whole loss: for the entries of its parameters with the
// largest gradients, fully trained and with LoRA, the gradient that Grad
// accumulates equals the central difference of the loss that Eval computes
// (float32 forward, step 1e-3, 1e-2 for the LoRA factors' smaller
// gradients: within 3 %). The pieces are checked against
// PyTorch elsewhere (the BERT backward, the technique's ∂/∂ vectors); this
// checks they are joined: the vectors' gradient reaches the encoder through
// the normalisation and the pooling, once per step, at the step's scale.
func TestCausal2VecContextEncoderGradient(t *testing.T) {
	for _, lora := range []*bert.LoRAConfig{nil, {Rank: 2}} {
		name := "full"
		if lora != nil {
			name = "lora"
		}
		t.Run(name, func(t *testing.T) {
			decDir, bertDir := tinyPair(t)
			d, err := decoder.Load(decDir, decoder.LoadOptions{})
			must(t, err)
			ce, err := NewContextEncoder(ContextTrain{Checkpoint: bertDir, LoRA: lora, Pooling: bert.PoolMean, Normalize: true, MaxLength: 32}, 1, 5)
			must(t, err)
			defer ce.Close()
			if lora != nil { // B starts at zero; give it values so A's gradient is not zero too
				for _, p := range ce.Params() {
					for i := range p.W {
						p.W[i] = float32(math.Sin(float64(i+len(p.Name)))) * 0.05
					}
				}
			}
			tech, err := New(d, ce, Config{EncoderDim: ce.Dim(), QueryPrefix: 1, DocPrefix: 1})
			must(t, err)
			texts := []string{"why is the sky blue", "tell me about the river",
				"the sky scatters blue light", "a castle on a hill", "rivers flow to the sea", "bread is baked"}
			// The tiny decoder and BERT share the MiniLM tokenizer.
			pb := bert.PaddedBatch(tokenizer.Pad(ce.tok.EncodeBatch(texts, 0), ce.tok.PadID()))
			b := &decoder.Batch{N: pb.N, T: pb.T, IDs: pb.IDs, Mask: pb.Mask}
			step := &decoder.Step{Q: 2, G: 2, Texts: texts, Batch: b}
			cc := objective.ContrastiveConfig{Temperature: 0.05, InBatch: true}
			tech.ZeroGrad()
			const scale = 0.5
			if _, err := tech.Grad(step, cc, scale); err != nil {
				t.Fatal(err)
			}
			type entry struct {
				p *ops.Param
				i int
			}
			var es []entry
			for _, p := range ce.Params() {
				for i := range p.G {
					es = append(es, entry{p, i})
				}
			}
			slices.SortFunc(es, func(a, b entry) int { return -cmpAbs(a.p.G[a.i], b.p.G[b.i]) })
			loss := func() float64 {
				l, err := tech.Eval(step, cc)
				must(t, err)
				return l.Value
			}
			h := 1e-3
			if lora != nil {
				h = 1e-2 // gradients 1e-3: a wider step keeps float32 rounding below the tolerance
			}
			for _, e := range es[:8] {
				w := e.p.W[e.i]
				e.p.W[e.i] = w + float32(h)
				lp := loss()
				e.p.W[e.i] = w - float32(h)
				lm := loss()
				e.p.W[e.i] = w
				fd := scale * (lp - lm) / (2 * h)
				got := float64(e.p.G[e.i])
				t.Logf("%s[%d]: gradient %.5g, central difference %.5g", e.p.Name, e.i, got, fd)
				if math.Abs(got-fd) > 0.03*math.Abs(fd)+1e-5 {
					t.Errorf("%s[%d]: gradient %.5g, central difference %.5g", e.p.Name, e.i, got, fd)
				}
			}
		})
	}
}

func cmpAbs(a, b float32) int {
	switch x, y := math.Abs(float64(a)), math.Abs(float64(b)); {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
