package train

import (
	"math"
	"slices"
	"testing"

	"github.com/anna-search/anna/train/decoder"
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/technique/causal2vec"
)

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
	for _, lora := range []*LoRAConfig{nil, {Rank: 2}} {
		name := "full"
		if lora != nil {
			name = "lora"
		}
		t.Run(name, func(t *testing.T) {
			d, err := decoder.Load(tinyDecoder(t, "llama"), decoder.LoadOptions{})
			must(t, err)
			ce, err := newContextEncoder(ContextTrain{Checkpoint: tinyCheckpoint(t, false), LoRA: lora, Pooling: PoolMean, Normalize: true, MaxLength: 32}, 1, 5)
			must(t, err)
			defer ce.Close()
			if lora != nil { // B starts at zero; give it values so A's gradient is not zero too
				for _, p := range ce.Params() {
					for i := range p.W {
						p.W[i] = float32(math.Sin(float64(i+len(p.Name)))) * 0.05
					}
				}
			}
			tech, err := causal2vec.New(d, ce, causal2vec.Config{EncoderDim: ce.Dim(), QueryPrefix: 1, DocPrefix: 1})
			must(t, err)
			texts := []string{"why is the sky blue", "tell me about the river",
				"the sky scatters blue light", "a castle on a hill", "rivers flow to the sea", "bread is baked"}
			// The tiny decoder and BERT share the MiniLM tokenizer.
			b := decoderBatch(padBatch(ce.tok.EncodeBatch(texts, 0), ce.tok.PadID()))
			step := &decoder.Step{Q: 2, G: 2, Texts: texts, Batch: b}
			cc := objective.ContrastiveConfig{Temperature: 0.05, InBatch: true}
			tech.ZeroGrad()
			const scale = 0.5
			if _, err := tech.Grad(step, cc, scale); err != nil {
				t.Fatal(err)
			}
			type entry struct {
				p *Param
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
				l, _, err := tech.Eval(step, cc)
				must(t, err)
				return l
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
