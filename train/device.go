package train

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/model"
)

// Accelerator is the seam to a device other than the Go CPU path
// (train/cuda's Device): Run hands it the BERT bi-encoder it loaded, and
// from then on the encoder's weights, their gradients and the AdamW
// moments live on the device. Each step tokenises and batches on the host,
// runs the encoder forward, pooling and backward on the device, and the
// loss on the host over the pooled N×C rows: the same
// objective.ContrastiveGrad as the CPU path for bi-encoders (the device
// is one more objective.Pass), and for cross-encoders bert.Model.CrossGrad:
// the head (pooler, tanh, classifier: N×C×C flops, kept on the host with
// its weights) and objective.CrossEncoderLoss over the [CLS] rows. Clipping takes one norm over both sides; AdamW runs on the device
// with the host optimizer's hyperparameters and step count. Checkpoints
// and the export copy the device's weights and moments back to the host
// Model first, so they are the CPU run's files: a run can stop on one
// device and resume on the other.
//
// What runs on a device today: BERT-family encoders, bi-encoder or
// cross-encoder (every objective), fully fine-tuned or under LoRA (the
// factors on the device, a cross-encoder's head on the host); Llama-family
// decoders (Llama, Mistral, Qwen2, Qwen3), fully fine-tuned or under LoRA,
// with gradient checkpointing or not, with last-token or mean pooling, or
// a trainable pooling head (latent or multi-layer: the head, N×r×C-sized,
// trains on the host over the rows the device returns, as a
// cross-encoder's head does), causal or bidirectional; and the papers'
// techniques (decoder.Technique), every decoder they run on the device
// (deviceRunner, through UseRunners: the one trained, and the frozen ones
// some run beside it) while their own parts run on the host (an LM head's
// cross-entropy over the tied embedding, an MLP, memory tokens, a context
// encoder). Under a technique a fully fine-tuned decoder's token
// embedding is also read on the host, so its host copy follows the
// device's after each update and its host-side gradient (the inputs' rows,
// the tied LM head's) joins the device's before clipping — V×C floats each
// way per optimizer step.
type Accelerator interface {
	// TrainEncoder uploads a BERT encoder's weights, named as in the
	// Hugging Face checkpoint after prefix ("" or "bert."): all of them
	// trained, or, given lora, the factors trained over a frozen encoder.
	TrainEncoder(cfg *model.Config, prefix string, weights map[string][]float32, lora []EncoderLoRA) (DeviceEncoder, error)
	// TrainDecoder uploads a decoder (decoder.Model.DeviceLayout): its
	// trainable params, by name, are the LoRA factors, or every weight
	// under full fine-tuning.
	TrainDecoder(m *decoder.Model) (DeviceDecoder, error)
	String() string // the device, for logs
}

// EncoderLoRA is a LoRA pair on the encoder weight named Weight: its
// factors A and B (trained, by their names), rank and scale α/r.
type EncoderLoRA struct {
	Weight string
	A, B   *Param
	Rank   int
	Scale  float32
}

// DeviceEncoder is an encoder resident on an Accelerator — a BERT encoder
// or a decoder — running the same ops in the same order as the CPU
// trainer's Model or decoder.Model.
type DeviceEncoder interface {
	// Forward runs the encoder over an N×T batch (types nil: all zero).
	Forward(ids, types []int32, mask []float32, N, T int) error
	// Pool pools the last Forward (PoolMean, PoolCLS, PoolLast) into N×C
	// embeddings on the host; for a decoder's trainable head (PoolLatent,
	// PoolMultiLayer) it returns the head's input rows instead
	// (decoder.Model.HeadForward's layout).
	Pool(mode string) ([]float32, error)
	// Backward adds to every gradient that of the loss given ∂loss/∂pooled
	// (for a head's mode, ∂loss/∂ its input rows).
	Backward(mode string, dPooled []float32) error
	ZeroGrad() error
	// GradSumSquares is Σ g² over every gradient (for the global norm).
	GradSumSquares() (float64, error)
	// ScaleGrads multiplies every gradient by c (clipping).
	ScaleGrads(c float32) error
	// AdamW is one AdamW.Update (step counts from 1).
	AdamW(lr, weightDecay, beta1, beta2, eps float64, step int) error
	// Has reports whether the device holds (and trains) the named weight.
	Has(name string) bool
	// State copies a weight and its AdamW moments into w, m and v (host
	// slices of its size; m and v nil: the weight only); moments reports
	// false before the first step, leaving m and v alone.
	State(name string, w, m, v []float32) (moments bool, err error)
	// AddGrad adds a gradient computed on the host to the named weight's.
	AddGrad(name string, g []float32) error
	// SetState replaces a weight and, when m is not nil, its moments.
	SetState(name string, w, m, v []float32) error
	Close() error
}

// DeviceDecoder is a decoder resident on an Accelerator. Beyond a
// DeviceEncoder's steps it runs the papers' techniques' passes
// (decoder.Runner, through deviceRunner): a forward over input embeddings
// instead of token ids, the whole final hidden state back on the host, and
// after Backward (in the PoolLatent mode: ∂loss/∂ that hidden state) the
// gradient of the first layer's input.
type DeviceDecoder interface {
	DeviceEncoder
	// ForwardInputs is Forward over N×T×C input embeddings.
	ForwardInputs(inputs, mask []float32, N, T int) error
	// LastHidden is the last forward's final hidden state, N×T×C.
	LastHidden() ([]float32, error)
	// DInputs is, after Backward, ∂loss/∂ the first layer's input (N×T×C,
	// zero at padded positions).
	DInputs() ([]float32, error)
}

// deviceRunner is a technique's decoder.Runner on a device: the passes
// run there, the hidden states and their gradients cross to the host.
type deviceRunner struct {
	dec    DeviceDecoder
	inputs bool // the last Forward's batch gave Inputs
}

func (r *deviceRunner) Forward(b *decoder.Batch) (*decoder.Acts, error) {
	var err error
	r.inputs = b.Inputs != nil
	if r.inputs {
		err = r.dec.ForwardInputs(b.Inputs, b.Mask, b.N, b.T)
	} else {
		err = r.dec.Forward(b.IDs, nil, b.Mask, b.N, b.T)
	}
	if err != nil {
		return nil, err
	}
	h, err := r.dec.LastHidden()
	return &decoder.Acts{N: b.N, T: b.T, Hidden: h}, err
}

func (r *deviceRunner) Backward(a *decoder.Acts, dHidden []float32) error {
	if err := r.dec.Backward(PoolLatent, dHidden); err != nil || !r.inputs {
		return err
	}
	var err error
	a.DInputs, err = r.dec.DInputs()
	return err
}

// deviceNet is a model on a DeviceEncoder: its passes run there (it is
// the trainer's passer) and its weights live there (a store). ps are the
// Params of the host model it was loaded from (a BERT Model or a
// decoder.Model, or a technique's), which receive the device's values for
// checkpoints and the export (toHost) and give them back after a resume
// (fromHost); check validates a batch as the host's Forward would. head
// are the host-side trainable params: a cross-encoder's head, which
// bert.Model.CrossGrad runs, or a decoder's pooling head, run by dec.
// shared are params the device trains that the host reads and adds
// gradients to as well (a technique's token embedding under full
// fine-tuning): their host gradient goes to the device before clipping and
// their weights come back after each update.
type deviceNet struct {
	ps     []*Param
	cfg    *model.Config
	check  func(*bert.Batch) error
	dec    *decoder.Model // nil for BERT
	enc    DeviceEncoder
	head   []*Param
	shared []*Param
}

// onDevice binds the loaded model (every weight trained, or LoRA factors)
// to acc.
func onDevice(acc Accelerator, src *source) (*deviceNet, error) {
	if src.dec != nil {
		m := src.dec
		enc, err := acc.TrainDecoder(m)
		if err != nil {
			return nil, fmt.Errorf("train: %s: %w", acc, err)
		}
		d, err := bind(acc, enc, &deviceNet{ps: m.Params, cfg: &m.Cfg, check: func(b *bert.Batch) error { return m.Validate(decoderBatch(b)) }, dec: m}, m.HeadParams())
		d.releaseHostGrads()
		return d, err
	}
	m := src.bert
	weights := map[string][]float32{}
	var lora []EncoderLoRA
	for _, p := range m.Params {
		weights[p.Name] = p.W
		if lp := m.LoRAOf(p); lp != nil {
			lora = append(lora, EncoderLoRA{Weight: p.Name, A: lp.A, B: lp.B, Rank: lp.Rank, Scale: lp.Scale})
		}
	}
	enc, err := acc.TrainEncoder(&m.Cfg, m.Prefix(), weights, lora)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", acc, err)
	}
	d, err := bind(acc, enc, &deviceNet{ps: m.Params, cfg: &m.Cfg, check: m.Validate}, m.HeadParams())
	d.releaseHostGrads()
	return d, err
}

// bind completes d with enc once every trainable param of d.ps is either
// on the device or one of head (trained on the host); otherwise it closes
// enc and says which param is missing.
func bind(acc Accelerator, enc DeviceEncoder, d *deviceNet, head []*Param) (*deviceNet, error) {
	onHost := map[*Param]bool{}
	for _, p := range head {
		onHost[p] = true
	}
	for _, p := range d.ps {
		switch {
		case p.Frozen || enc.Has(p.Name):
		case onHost[p]:
			d.head = append(d.head, p)
		default:
			enc.Close()
			return nil, fmt.Errorf("train: %s trains on the CPU but %s does not hold it", p.Name, acc)
		}
	}
	d.enc = enc
	return d, nil
}

// releaseHostGrads drops the host gradients of the params the device
// trains (its own gradients are the ones used), but for shared ones, whose
// host gradient the host still fills: for a decoder fully fine-tuned, the
// size of the model in host memory. A nil d is left alone.
func (d *deviceNet) releaseHostGrads() {
	if d == nil {
		return
	}
	for _, p := range d.ps {
		if !p.Frozen && d.enc.Has(p.Name) && !slices.Contains(d.shared, p) {
			p.G = nil
		}
	}
}

// devicePass is a batch through the device's model: forward and pooling
// there (a decoder's trainable head on the host, over the rows the device
// returns), the rows on the host.
type devicePass struct {
	d        *deviceNet
	b        *bert.Batch
	pooling  string
	headActs *decoder.Acts // the last Forward's, for a decoder's head
}

func (d *deviceNet) pass(b *bert.Batch, pooling string) objective.Pass {
	return &devicePass{d: d, b: b, pooling: pooling}
}

func (p *devicePass) Forward() ([]float32, error) {
	d, b := p.d, p.b
	if err := d.check(b); err != nil {
		return nil, err
	}
	if err := d.enc.Forward(b.IDs, b.Types, b.Mask, b.N, b.T); err != nil {
		return nil, err
	}
	rows, err := d.enc.Pool(p.pooling)
	if err != nil || d.dec == nil || !isHead(p.pooling) {
		return rows, err
	}
	a, e, err := d.dec.HeadForward(p.pooling, rows, decoderBatch(b))
	p.headActs = a
	return e, err
}

// Backward hands ∂loss/∂pooled to the device, through the host's head
// first for a decoder's trainable head.
func (p *devicePass) Backward(de []float32) error {
	if p.d.dec != nil && isHead(p.pooling) {
		de = p.d.dec.HeadBackward(p.headActs, de)
	}
	return p.d.enc.Backward(p.pooling, de)
}

// The store's side: where the weights live.

func (d *deviceNet) params() []*Param { return d.ps }

func (d *deviceNet) zeroGrad() error {
	for _, ps := range [][]*Param{d.head, d.shared} {
		for _, p := range ps {
			clear(p.G)
		}
	}
	return d.enc.ZeroGrad()
}

func (d *deviceNet) clip(maxNorm float64) (float64, error) {
	for _, p := range d.shared {
		if err := d.enc.AddGrad(p.Name, p.G); err != nil {
			return 0, fmt.Errorf("train: %s's host gradient to the device: %w", p.Name, err)
		}
		clear(p.G)
	}
	s, err := d.enc.GradSumSquares()
	if err != nil {
		return 0, err
	}
	norm := math.Sqrt(s + gradSumSquares(d.head))
	if c, ok := clipFactor(norm, maxNorm); ok {
		scaleGrads(d.head, c)
		return norm, d.enc.ScaleGrads(c)
	}
	return norm, nil
}

func (d *deviceNet) update(opt *AdamW, lr float64) error {
	if len(d.head) > 0 {
		opt.Update(d.head, lr) // counts the step
	} else {
		opt.Step++
	}
	if err := d.enc.AdamW(lr, opt.WeightDecay, opt.Beta1, opt.Beta2, opt.Eps, opt.Step); err != nil {
		return err
	}
	for _, p := range d.shared {
		if _, err := d.enc.State(p.Name, p.W, nil, nil); err != nil {
			return fmt.Errorf("train: %s from the device: %w", p.Name, err)
		}
	}
	return nil
}

func (d *deviceNet) toHost(opt *AdamW) error {
	for _, p := range d.ps {
		if p.Frozen || !d.enc.Has(p.Name) {
			continue
		}
		m, v := opt.m[p], opt.v[p] // the last checkpoint's, reused
		if len(m) != len(p.W) || len(v) != len(p.W) {
			m, v = make([]float32, len(p.W)), make([]float32, len(p.W))
		}
		ok, err := d.enc.State(p.Name, p.W, m, v)
		if err != nil {
			return fmt.Errorf("train: %s from the device: %w", p.Name, err)
		}
		if ok {
			opt.m[p], opt.v[p] = m, v
		}
	}
	return nil
}

func (d *deviceNet) fromHost(opt *AdamW) error {
	for _, p := range d.ps {
		if p.Frozen || !d.enc.Has(p.Name) {
			continue
		}
		m, v := opt.m[p], opt.v[p]
		if err := d.enc.SetState(p.Name, p.W, m, v); err != nil {
			return fmt.Errorf("train: %s to the device: %w", p.Name, err)
		}
	}
	return nil
}

func (d *deviceNet) close() error { return d.enc.Close() }

// deviceTechnique is a technique whose decoders run on a device (their
// Runners deviceRunners): the steps are the technique's, the store dev's,
// whose head are the technique's host-side params (its own, beside the
// decoder's). frozen are decoders uploaded beside the trained one.
type deviceTechnique struct {
	tech   decoder.Technique
	dev    *deviceNet
	frozen []DeviceDecoder
}

// techniqueOnDevice uploads the decoders t runs — the one it trains (under
// LoRA or fully) and any frozen ones — to acc and makes them its Runners.
func techniqueOnDevice(acc Accelerator, t decoder.Technique) (*deviceTechnique, error) {
	trained := t.Model()
	dt := &deviceTechnique{tech: t}
	var run *deviceRunner
	err := t.UseRunners(func(m *decoder.Model) (decoder.Runner, error) {
		dd, err := acc.TrainDecoder(m)
		if err != nil {
			return nil, fmt.Errorf("train: technique on %s: %w", acc, err)
		}
		r := &deviceRunner{dec: dd}
		if m == trained && run == nil {
			run = r
		} else {
			dt.frozen = append(dt.frozen, dd)
		}
		return r, nil
	})
	if err == nil && run == nil {
		err = fmt.Errorf("train: the technique runs no pass of the decoder it trains on %s", acc)
	}
	if err != nil {
		if run != nil {
			run.dec.Close()
		}
		return nil, errors.Join(err, dt.close())
	}
	ofModel := map[*Param]bool{}
	for _, p := range trained.Params {
		ofModel[p] = true
	}
	var host []*Param
	for _, p := range t.Params() {
		if !ofModel[p] {
			host = append(host, p)
		}
	}
	if dt.dev, err = bind(acc, run.dec, &deviceNet{ps: t.Params(), cfg: &trained.Cfg}, host); err != nil { // bind closes run.dec
		return nil, errors.Join(err, dt.close())
	}
	if e := trained.Embedding(); !e.Frozen {
		// Fully fine-tuned: the technique's host parts read the token
		// embedding (EmbedTokens, the tied LM head) and add to its gradient.
		dt.dev.shared = []*Param{e}
	}
	dt.dev.releaseHostGrads()
	return dt, nil
}

func (n *deviceTechnique) close() error {
	var errs []error
	if n.dev != nil {
		errs = append(errs, n.dev.close())
	}
	for _, f := range n.frozen {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

func (n *deviceTechnique) params() []*Param { return n.tech.Params() }

func (n *deviceTechnique) zeroGrad() error {
	n.tech.ZeroGrad()
	return n.dev.zeroGrad()
}

func (n *deviceTechnique) clip(maxNorm float64) (float64, error) { return n.dev.clip(maxNorm) }
func (n *deviceTechnique) update(opt *AdamW, lr float64) error   { return n.dev.update(opt, lr) }
func (n *deviceTechnique) toHost(opt *AdamW) error               { return n.dev.toHost(opt) }
func (n *deviceTechnique) fromHost(opt *AdamW) error             { return n.dev.fromHost(opt) }
