package causal2vec

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
)

const fxQ, fxG, fxT, fxK, fxQP = 2, 2, 8, 6, 2

func newTech(t *testing.T, cfg Config) (*Technique, *fixture) {
	t.Helper()
	mc := tinyConfig()
	m, err := decoder.New(mc, decoder.RandomTensors(mc, 0.1, 3))
	if err != nil {
		t.Fatal(err)
	}
	m.Threads = 2
	fx := newFixture(rand.New(rand.NewPCG(3, 3)), fxQ, fxG, fxT, fxK, mc.VocabSize, fxQP)
	if cfg.EncoderDim == 0 {
		cfg.EncoderDim = fxK
	}
	tech, err := New(m, fx.enc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tech, fx
}

func wantErr(t *testing.T, what string, err error, substr string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), substr) {
		t.Errorf("%s: got error %v, want one containing %q", what, err, substr)
	}
}

// Bad input is an error that says what is wrong.
func TestBadInputRefused(t *testing.T) {
	mc := tinyConfig()
	m, _ := decoder.New(mc, decoder.RandomTensors(mc, 0.1, 1))
	_, err := New(m, nil, Config{EncoderDim: 4})
	wantErr(t, "nil encoder", err, "no encoder")
	_, err = New(nil, &Table{}, Config{EncoderDim: 4})
	wantErr(t, "nil model", err, "no decoder")
	_, err = New(m, &Table{}, Config{})
	wantErr(t, "no encoder dim", err, "encoder dimension 0")
	_, err = New(m, &Table{}, Config{EncoderDim: 4, QueryPrefix: -1})
	wantErr(t, "negative prefix", err, "must not be negative")

	cfg := Config{QueryPrefix: 1 + fxQP, DocPrefix: 1}
	cc := objective.ContrastiveConfig{InBatch: true}
	tech, fx := newTech(t, cfg)
	s := fx.step
	_, err = tech.Grad(&decoder.Step{Q: 1, G: 1, Batch: s.Batch}, cc, 1)
	wantErr(t, "no texts", err, "has 0 texts, want 1 queries + 1 documents")
	_, err = tech.Embed(nil, s.Batch, false)
	wantErr(t, "embed no texts", err, "no texts")
	_, err = tech.Embed(s.Texts[:3], s.Batch, false)
	wantErr(t, "texts/batch mismatch", err, "3 texts but 6 tokenised sequences")
	_, err = tech.Eval(&decoder.Step{Q: 0, G: 3}, cc)
	wantErr(t, "no queries", err, "0 queries")
	_, err = tech.Grad(s, objective.ContrastiveConfig{DistillWeight: 1}, 1)
	if err != nil {
		t.Fatalf("a step with a teacher: %v", err)
	}
	noTeacher := *s
	noTeacher.Teacher = nil
	_, err = tech.Grad(&noTeacher, objective.ContrastiveConfig{DistillWeight: 1}, 1)
	wantErr(t, "distillation without a teacher", err, "distillation needs 4 teacher scores")

	// The encoder disagrees with the MLP's input.
	wrong, _ := newTech(t, Config{EncoderDim: fxK + 1, QueryPrefix: 1 + fxQP, DocPrefix: 1})
	wrong.Enc = fx.enc
	_, err = wrong.Grad(s, cc, 1)
	wantErr(t, "encoder dim mismatch", err, "encoder returned 6-dimensional vectors, but the MLP takes 7")
	short := Frozen(func(texts []string) ([]float32, int, error) { return make([]float32, fxK), fxK, nil })
	tech.Enc = short
	_, err = tech.Grad(s, cc, 1)
	wantErr(t, "too few vectors", err, "encoder returned 6 values for 6 texts of dimension 6")
	tech.Enc = Frozen(func([]string) ([]float32, int, error) { return nil, 0, errors.New("boom") })
	_, err = tech.Grad(s, cc, 1)
	wantErr(t, "encoder failure", err, "causal2vec: encoder: boom")
	tech.Enc = &Table{Dim: fxK, Vecs: map[string][]float32{}}
	_, err = tech.Grad(s, cc, 1)
	wantErr(t, "unknown text", err, "no vector for text 0")
	tech.Enc = fx.enc

	// C must come before EOS; the batch must be right-padded ids.
	late, _ := newTech(t, Config{QueryPrefix: fxT, DocPrefix: 1})
	late.Enc = fx.enc
	_, err = late.Grad(s, cc, 1)
	wantErr(t, "C after EOS", err, "sequence 0: contextual token after 8 tokens, but it has 8")
	bad := *s.Batch
	bad.Mask = slices.Clone(s.Batch.Mask)
	bad.Mask[fxT] = 0 // sequence 1 starts with padding
	_, err = tech.Embed(s.Texts, &bad, false)
	wantErr(t, "left padding", err, "right padding only")
	bad = *s.Batch
	bad.IDs = slices.Clone(s.Batch.IDs)
	bad.IDs[0] = 1000
	_, err = tech.Embed(s.Texts, &bad, false)
	wantErr(t, "id outside vocabulary", err, "token id 1000 at sequence 0, position 0 outside the vocabulary")
	bad = *s.Batch
	bad.Inputs = make([]float32, 1)
	_, err = tech.Embed(s.Texts, &bad, false)
	wantErr(t, "inputs given", err, "already has input embeddings")
	long := *s.Batch
	long.T, long.IDs, long.Mask = 32, make([]int32, 6*32), make([]float32, 6*32)
	for i := range long.Mask {
		long.Mask[i] = 1
	}
	_, err = tech.Embed(s.Texts, &long, false)
	wantErr(t, "too long with C", err, "sequence length 33 exceeds max_position_embeddings 32")
	insertErr, _ := newTech(t, Config{Insert: func(string, []int32, bool) (int, error) { return 0, errors.New("no instruction found") }})
	insertErr.Enc = fx.enc
	_, err = insertErr.Grad(s, cc, 1)
	wantErr(t, "insert error", err, "sequence 0: contextual token position: no instruction found")
}

// Params are the MLP's then the decoder's; Grad adds scale × the gradient
// (also to what the encoder receives); Embed and Eval see the embeddings
// Grad trains.
func TestParamsScaleAndEmbed(t *testing.T) {
	cfg := Config{QueryPrefix: 1 + fxQP, DocPrefix: 1, Bias: true}
	tech, fx := newTech(t, cfg)
	ps := tech.Params()
	if len(ps) != 4+len(tech.Model.Params) || ps[0].Name != W1Name || ps[1].Name != B1Name || ps[2].Name != W2Name || ps[3].Name != B2Name || ps[4] != tech.Model.Params[0] {
		t.Fatalf("params order: %d params starting %s %s", len(ps), ps[0].Name, ps[4].Name)
	}
	if ps[0].NoDecay || !ps[1].NoDecay {
		t.Errorf("weight decay flags: W1 NoDecay=%v, b1 NoDecay=%v", ps[0].NoDecay, ps[1].NoDecay)
	}
	cc := objective.ContrastiveConfig{InBatch: true, DistillWeight: 0.3}
	tech.ZeroGrad()
	gl1, err := tech.Grad(fx.step, cc, 1)
	if err != nil {
		t.Fatal(err)
	}
	l1 := gl1.Value
	g1 := [][]float32{slices.Clone(ps[0].G), slices.Clone(ps[len(ps)-1].G), slices.Clone(fx.enc.grad)}
	tech.ZeroGrad()
	if slices.ContainsFunc(ps[0].G, func(v float32) bool { return v != 0 }) {
		t.Fatal("ZeroGrad left the MLP's gradient")
	}
	gl2, err := tech.Grad(fx.step, cc, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	l2 := gl2.Value
	if l1 != l2 {
		t.Errorf("loss changed with the scale: %g, %g", l1, l2)
	}
	for i, g := range [][]float32{ps[0].G, ps[len(ps)-1].G, fx.enc.grad} {
		for j := range g {
			if d := math.Abs(float64(g[j] - 0.5*g1[i][j])); d > 1e-6*(1+math.Abs(float64(g1[i][j]))) {
				t.Fatalf("gradient %d[%d] with scale 0.5: %g, want %g", i, j, g[j], 0.5*g1[i][j])
			}
		}
	}
	if parts := gl2.Parts; math.Abs(parts.InfoNCE+parts.Distill-l2) > 1e-9 || parts.Distill <= 0 {
		t.Errorf("loss parts %+v do not add up to %g", parts, l2)
	}
	el, err := tech.Eval(fx.step, cc)
	loss, correct := el.Value, el.Correct
	if err != nil || loss != l1 || correct < 0 || correct > fxQ {
		t.Fatalf("Eval: loss %g (Grad's %g), correct %d, err %v", loss, l1, correct, err)
	}
	// Embed: the queries' and documents' embeddings Grad's loss is made of.
	b, N := fx.step.Batch, fxQ+fxQ*fxG
	sub := func(lo, hi int) *decoder.Batch {
		return &decoder.Batch{N: hi - lo, T: b.T, IDs: b.IDs[lo*b.T : hi*b.T], Mask: b.Mask[lo*b.T : hi*b.T]}
	}
	q, err := tech.Embed(fx.step.Texts[:fxQ], sub(0, fxQ), true)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tech.Embed(fx.step.Texts[fxQ:], sub(fxQ, N), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != fxQ*tech.Dim() || len(d) != fxQ*fxG*tech.Dim() || tech.Dim() != 64 {
		t.Fatalf("embedding sizes %d, %d (dim %d)", len(q), len(d), tech.Dim())
	}
	want, _, _, _ := objective.ContrastiveLoss(q, d, fxQ, fxG, tech.Dim(), fx.step.Teacher, cc)
	if math.Abs(want-l1) > 1e-5*math.Abs(l1) {
		t.Errorf("loss over Embed's vectors %g, Grad's %g", want, l1)
	}
	// The EOS half is the decoder's last hidden state without C moved;
	// C's half depends on the encoder's vector.
	v := fx.enc.Vecs[fx.step.Texts[0]]
	saved := slices.Clone(v)
	v[0] += 1
	q2, _ := tech.Embed(fx.step.Texts[:fxQ], sub(0, fxQ), true)
	copy(v, saved)
	if slices.Equal(q[:tech.Dim()], q2[:tech.Dim()]) {
		t.Error("the embedding does not depend on the encoder's vector")
	}
}

// Save writes the MLP and the pairing; Load restores the weights and
// refuses another pairing.
func TestSaveLoad(t *testing.T) {
	cfg := Config{EncoderModel: "sentence-transformers/all-MiniLM-L6-v2", DecoderModel: "tiny", QueryPrefix: 1 + fxQP, DocPrefix: 1, Bias: true, Seed: 1}
	a, _ := newTech(t, cfg)
	dir := t.TempDir()
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	man, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Encoder.Model != cfg.EncoderModel || man.Encoder.Dim != fxK || man.Decoder.HiddenSize != 32 || man.EmbeddingDim != 64 ||
		!man.MLP.Bias || man.Placement.QueryPrefix != 1+fxQP || !man.Decoder.Causal {
		t.Errorf("manifest %+v", man)
	}
	cfg.Seed = 2
	b, _ := newTech(t, cfg)
	if slices.Equal(a.MLPParams()[0].W, b.MLPParams()[0].W) {
		t.Fatal("two seeds gave the same MLP")
	}
	if err := b.Load(dir); err != nil {
		t.Fatal(err)
	}
	for i, p := range a.MLPParams() {
		if !slices.Equal(p.W, b.MLPParams()[i].W) {
			t.Errorf("%s not restored", p.Name)
		}
	}
	c, _ := newTech(t, Config{EncoderDim: fxK + 2, Bias: true})
	wantErr(t, "encoder dim", c.Load(dir), "pairs a 6-dimensional encoder (sentence-transformers/all-MiniLM-L6-v2), this technique's is 8-dimensional")
	nb, _ := newTech(t, Config{})
	wantErr(t, "bias", nb.Load(dir), "bias=true")
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"format":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "format", b.Load(dir), `format "other"`)
}
