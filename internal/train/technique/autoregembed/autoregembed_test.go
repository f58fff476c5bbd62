package autoregembed

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

func newTiny(t *testing.T, c Config, seed uint64) *Technique {
	t.Helper()
	cfg := tinyConfig()
	tq, err := New(cfg, decoder.RandomTensors(cfg, 0.1, seed), nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return tq
}

func TestBadInput(t *testing.T) {
	cfg := tinyConfig()
	ts := decoder.RandomTensors(cfg, 0.1, 1)
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"stage", func(c *Config) { c.Stage = 3 }, "stage 3 unknown"},
		{"memory tokens", func(c *Config) { c.MemoryTokens = -1 }, "-1 memory tokens"},
		{"beta", func(c *Config) { c.Beta = math.NaN() }, "beta NaN"},
		{"temperature", func(c *Config) { c.Temperature = -1 }, "temperature -1"},
		{"prefix id", func(c *Config) { c.Prefix = []int32{64} }, "prefix token 0 is id 64, outside the vocabulary of 64"},
		{"instruction id", func(c *Config) { c.DocInstruction = []int32{3, -2} }, "document instruction token 1 is id -2"},
		{"eos", func(c *Config) { c.EOS = 99 }, "EOS token 0 is id 99"},
		{"memory size", func(c *Config) { c.Memory = make([]float32, 7) }, "7 memory values, want 5 tokens × 32"},
		{"lora", func(c *Config) { c.LoRA = &decoder.LoRAConfig{Rank: 2, Targets: []string{"w_proj"}} }, `lora target "w_proj" unknown`},
	} {
		c := testConfig(Alignment)
		tc.edit(&c)
		if _, err := New(cfg, ts, nil, c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	untied := *cfg
	untied.TieWordEmbeddings = false
	if _, err := New(&untied, ts, nil, testConfig(Compression)); err == nil || !strings.Contains(err.Error(), "no lm_head.weight") {
		t.Errorf("untied without lm_head: error %v", err)
	}
	bad := map[string]*safetensors.Tensor{}
	for n, v := range ts {
		bad[n] = v
	}
	delete(bad, "norm.weight")
	if _, err := New(cfg, ts, bad, testConfig(Alignment)); err == nil || !strings.Contains(err.Error(), "frozen decoder") || !strings.Contains(err.Error(), "norm.weight (missing)") {
		t.Errorf("decoder checkpoint without norm.weight: error %v", err)
	}

	tq := newTiny(t, testConfig(Alignment), 1)
	r := rand.New(rand.NewPCG(1, 2))
	cc := objective.ContrastiveConfig{Temperature: 0.05}
	steps := []struct {
		name string
		step func() *decoder.Step
		cc   objective.ContrastiveConfig
		want string
	}{
		{"nil", func() *decoder.Step { return nil }, cc, "no step"},
		{"no negative", func() *decoder.Step { return randomStep(r, 2, 1, 64) }, cc, "needs a negative per query"},
		{"count", func() *decoder.Step { s := randomStep(r, 2, 3, 64); s.G = 2; return s }, cc, "step has 8 sequences, want 2 queries + 4 documents"},
		{"no batch", func() *decoder.Step { s := randomStep(r, 2, 3, 64); s.Batch = nil; return s }, cc, "no token batch"},
		{"left padding", func() *decoder.Step { s := randomStep(r, 2, 3, 64); s.Batch.Mask[0] = 0; return s }, cc, "right padding only"},
		{"id", func() *decoder.Step { s := randomStep(r, 2, 3, 64); s.Batch.IDs[s.Batch.T] = 64; return s }, cc, "token id 64 at sequence 1, position 0"},
		{"distill", func() *decoder.Step { return randomStep(r, 2, 3, 64) }, objective.ContrastiveConfig{DistillWeight: 1}, "no teacher term"},
	}
	for _, tc := range steps {
		_, err := tq.Grad(tc.step(), tc.cc, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Grad, %s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		_, err = tq.Eval(tc.step(), tc.cc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Eval, %s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := tq.Embed(randomStep(r, 1, 1, 64).Batch, Role(5)); err == nil || !strings.Contains(err.Error(), "role 5 unknown") {
		t.Errorf("Embed with an unknown role: error %v", err)
	}
	long := &decoder.Batch{N: 1, T: 30, IDs: make([]int32, 30), Mask: make([]float32, 30)}
	for i := range long.Mask {
		long.Mask[i] = 1
	}
	if _, err := tq.Embed(long, Query); err == nil || !strings.Contains(err.Error(), "exceeds max_position_embeddings") {
		t.Errorf("Embed of a text too long with its template: error %v", err)
	}
}

// TestAlignmentStartsAtReference checks the reference: when stage 2 starts
// (LoRA's B zero, the memory as given) log p = log p_ref, so every S2 is
// −σ(0) = −1/2 and the loss is −log(e^{S1/τ} / (e^{S1/τ} + (G−1)e^{−1/(2τ)}))
// with S1 from the Go side's own log-likelihoods.
func TestAlignmentStartsAtReference(t *testing.T) {
	c := testConfig(Alignment)
	c.LoRA = &decoder.LoRAConfig{Rank: 4, Alpha: 8}
	tq := newTiny(t, c, 3)
	r := rand.New(rand.NewPCG(3, 4))
	const Q, G, tau = 3, 4, 0.05
	s := randomStep(r, Q, G, 64)
	el, err := tq.Eval(s, objective.ContrastiveConfig{Temperature: tau})
	if err != nil {
		t.Fatal(err)
	}
	loss := el.Value
	// S1 from E's own log-likelihoods of each positive.
	texts, _ := tq.texts(s.Batch)
	var want float64
	for i := 0; i < Q; i++ {
		lq := tq.logLikelihoodOf(t, texts[i], c.QueryInstruction, texts[Q+i*G])
		ls := tq.logLikelihoodOf(t, texts[Q+i*G], c.DocInstruction, texts[Q+i*G])
		s1 := -sigmoid(0.1 * math.Abs(lq-ls))
		want += -math.Log(math.Exp(s1/tau) / (math.Exp(s1/tau) + float64(G-1)*math.Exp(-0.5/tau)))
	}
	want /= Q
	if math.Abs(loss-want) > 1e-4*want {
		t.Errorf("loss at the start of stage 2 %.7g, want %.7g", loss, want)
	}
}

// logLikelihoodOf is log p(target | E(text, instr)) computed alone.
func (tq *Technique) logLikelihoodOf(t *testing.T, text, instr, target []int32) float64 {
	t.Helper()
	eb := tq.encoderBatch(tq.enc, tq.mem.W, [][]int32{text}, [][]int32{instr})
	a, err := tq.enc.Forward(eb.b)
	if err != nil {
		t.Fatal(err)
	}
	db := tq.decoderBatch(eb.compressed(a, tq.k, tq.C), []int{0}, [][]int32{target})
	da, err := tq.dec.Forward(db.b)
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := tq.logLikelihoods(da, db, nil)
	return lp[0]
}

// TestEvalIsGradsForward checks that Eval's loss is Grad's, that Eval adds
// no gradient, and that training E leaves the frozen decoder and the
// reference untouched (full fine-tuning copies their weights).
func TestEvalIsGradsForward(t *testing.T) {
	for _, stage := range []Stage{Compression, Alignment} {
		tq := newTiny(t, testConfig(stage), 5)
		r := rand.New(rand.NewPCG(5, 6))
		s := randomStep(r, 2, 3, 64)
		cc := objective.ContrastiveConfig{Temperature: 0.05}
		dec0 := append([]float32(nil), tq.dec.Params[0].W...)
		tq.ZeroGrad()
		e, err := tq.Eval(s, cc)
		if err != nil {
			t.Fatal(err)
		}
		el, correct := e.Value, e.Correct
		for _, p := range tq.Params() {
			for _, g := range p.G {
				if g != 0 {
					t.Fatalf("%v: Eval left a gradient in %s", stage, p.Name)
				}
			}
		}
		if correct < 0 || correct > 2 || stage == Compression && correct != 0 {
			t.Errorf("%v: %d correct of 2", stage, correct)
		}
		g, err := tq.Grad(s, cc, 1)
		if err != nil {
			t.Fatal(err)
		}
		gl := g.Value
		if el != gl {
			t.Errorf("%v: Eval loss %v, Grad loss %v", stage, el, gl)
		}
		// One SGD step on the trainable params; the frozen models keep theirs.
		for _, p := range tq.Params() {
			if !p.Frozen {
				for i := range p.W {
					p.W[i] -= 0.5 * p.G[i]
				}
			}
		}
		for i, v := range tq.dec.Params[0].W {
			if v != dec0[i] {
				t.Fatalf("%v: the frozen decoder's embedding changed with E's", stage)
			}
		}
		if tq.ref != nil && sharesData(tensorsOf(tq.enc), tensorsOf(tq.ref)) {
			t.Errorf("%v: the reference shares weights with the fully trained E", stage)
		}
		if sharesData(tensorsOf(tq.enc), tensorsOf(tq.dec)) {
			t.Errorf("%v: the frozen decoder shares weights with the fully trained E", stage)
		}
	}
}

func tensorsOf(m *decoder.Model) map[string]*safetensors.Tensor {
	out := map[string]*safetensors.Tensor{}
	for _, p := range m.Params {
		out[p.Name] = &safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: p.W}
	}
	return out
}

// TestTrainingLowersLoss takes a few plain gradient steps on one batch in
// each stage, full and LoRA, and expects its loss to fall.
func TestTrainingLowersLoss(t *testing.T) {
	for _, stage := range []Stage{Compression, Alignment} {
		for _, lora := range []bool{false, true} {
			c := testConfig(stage)
			lr := float32(0.05)
			if lora {
				c.LoRA = &decoder.LoRAConfig{Rank: 4, Alpha: 8}
				lr = 0.2
			}
			tq := newTiny(t, c, 9)
			s := randomStep(rand.New(rand.NewPCG(9, 10)), 2, 3, 64)
			cc := objective.ContrastiveConfig{Temperature: 0.05}
			fl, err := tq.Eval(s, cc)
			if err != nil {
				t.Fatal(err)
			}
			first := fl.Value
			for i := 0; i < 8; i++ {
				tq.ZeroGrad()
				if _, err := tq.Grad(s, cc, 1); err != nil {
					t.Fatal(err)
				}
				for _, p := range tq.Params() {
					if !p.Frozen {
						for j := range p.W {
							p.W[j] -= lr * p.G[j]
						}
					}
				}
			}
			ll, err := tq.Eval(s, cc)
			if err != nil {
				t.Fatal(err)
			}
			last := ll.Value
			t.Logf("%v lora=%v: loss %.5f -> %.5f", stage, lora, first, last)
			if !(last < first) {
				t.Errorf("%v lora=%v: loss %.5f -> %.5f after 8 steps", stage, lora, first, last)
			}
		}
	}
}

// TestEmbed checks the inference embedding: unit length, the same text the
// same vector whatever it is batched with, and the instruction mattering.
func TestEmbed(t *testing.T) {
	tq := newTiny(t, testConfig(Compression), 11)
	r := rand.New(rand.NewPCG(11, 12))
	b := randomStep(r, 2, 1, 64).Batch // 4 texts
	e, err := tq.Embed(b, Query)
	if err != nil {
		t.Fatal(err)
	}
	C := tq.C
	if len(e) != b.N*C {
		t.Fatalf("%d values, want %d × %d", len(e), b.N, C)
	}
	for n := 0; n < b.N; n++ {
		var ss float64
		for _, v := range e[n*C : n*C+C] {
			ss += float64(v) * float64(v)
		}
		if math.Abs(ss-1) > 1e-5 {
			t.Errorf("text %d: squared norm %v", n, ss)
		}
	}
	one := &decoder.Batch{N: 1, T: b.T, IDs: b.IDs[b.T : 2*b.T], Mask: b.Mask[b.T : 2*b.T]}
	e1, err := tq.Embed(one, Query)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < C; c++ {
		if d := math.Abs(float64(e1[c] - e[C+c])); d > 1e-5 {
			t.Fatalf("text 1 alone differs from text 1 in its batch by %g", d)
		}
	}
	ed, err := tq.Embed(one, Document)
	if err != nil {
		t.Fatal(err)
	}
	var diff float64
	for c := range ed {
		diff += math.Abs(float64(ed[c] - e1[c]))
	}
	if diff < 1e-3 {
		t.Error("query and document embeddings of one text are the same: the instruction is not used")
	}
}
