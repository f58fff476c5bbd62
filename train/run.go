package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/safetensors"
	"github.com/anna-search/anna/report"
	"github.com/anna-search/anna/tokenizer"
	"github.com/anna-search/anna/train/objective"
	"github.com/anna-search/anna/train/technique/autoregembed"
	"github.com/anna-search/anna/train/technique/causal2vec"
)

// Config is one training run. Zero values pick the defaults noted.
type Config struct {
	// ModelDir is a Hugging Face checkpoint (config.json, *.safetensors,
	// tokenizer.json) of a BERT encoder or a Llama-family decoder, or a
	// llama GGUF file (train/decoder).
	ModelDir string
	Data     string // FlagEmbedding JSON lines (annactl mine's output)
	OutDir   string // checkpoint/, hf/ (the trained checkpoint), model/ (the anna model), metrics.jsonl and report.html go here

	Objective string // contrastive (default), bce or listwise
	// Pooling is the bi-encoder pooling: for BERT what ModelDir's
	// sentence-transformers files say (its Pooling module), else mean; cls,
	// lasttoken (decoders' default), or for decoders a trainable head,
	// latent or multilayer (HeadLatents, HeadHeads), which the exported
	// graph applies; a checkpoint exported with a head defaults to it.
	Pooling   string
	MaxLength int // tokens per text (per pair for cross-encoders); default 128

	BatchSize int // queries per micro-batch (default 16)
	GroupSize int // documents per query: 1 positive + GroupSize−1 negatives (default 8)
	Accum     int // micro-batches per optimizer step (default 1)
	Epochs    int // default 1; MaxSteps, when set, wins
	MaxSteps  int

	LR          float64 // peak learning rate (default 2e-5; 1e-4 with LoRA)
	WeightDecay float64 // default 0.01
	Warmup      float64 // warm-up as a fraction of the steps (default 0.1)
	ClipNorm    float64 // global gradient norm clip (default 1; negative: off)

	Temperature        float64 // InfoNCE temperature (default 0.05)
	NoInBatch          bool    // only the query's own negatives (default: in-batch too)
	DistillWeight      float64 // weight of the KL distillation term (0: off)
	TeacherTemperature float64 // default 1

	// LoRA, nil for full fine-tuning. Alpha ≤ 0 means 2×rank for BERT and
	// rank/2 for decoders (paper 003's rank 64, alpha 32); no targets means
	// query and value for BERT, every projection for decoders (q_proj,
	// k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj).
	LoRA *LoRAConfig
	// Bidirectional lets a decoder's tokens attend to the whole sequence
	// instead of the tokens before them. anna's ONNX decoder graph is
	// causal, so such a run needs NoExport.
	Bidirectional bool
	// Recompute is gradient checkpointing for decoders: each layer's
	// activations are recomputed in the backward instead of kept (one
	// layer's memory instead of all of them, for about a third more
	// compute), with bit-for-bit the same gradients.
	Recompute bool
	// HeadLatents and HeadHeads shape a trainable pooling head (0: 16
	// latent queries, 8 attention heads).
	HeadLatents, HeadHeads int

	// Technique replaces the decoder's contrastive step with one of the
	// papers' methods (TechniqueCausal2Vec, TechniqueAnchor); "" is the
	// plain contrastive step.
	Technique string
	// ContextEncoder embeds texts for Causal2Vec (a frozen small encoder,
	// e.g. anna's ORT encoder of all-MiniLM-L6-v2), giving
	// ContextEncoderDim floats per text; ContextEncoderName is recorded in
	// its export.
	ContextEncoder     func(texts []string) ([][]float32, error)
	ContextEncoderDim  int
	ContextEncoderName string
	// ContextEncoderPath and ContextEncoderFingerprint locate and pin the
	// context encoder (an anna model directory) for the export's pairing:
	// the encoder serving the exported model loads it and checks it.
	ContextEncoderPath        string
	ContextEncoderFingerprint string
	// ContextTrain, when set, trains the context encoder with the decoder
	// (it replaces ContextEncoder; ContextEncoderName still names it).
	ContextTrain *ContextTrain
	// AnchorAlpha is Anchor's weight of EBQ2D (query embedding → document;
	// EBD2Q gets 1 − α): 0 means the paper's 0.2, a negative value α = 0
	// (the paper's OnlyD2Q).
	AnchorAlpha float64
	// AutoRegStage1 is, for TechniqueAutoRegAlign, the output directory of
	// the TechniqueAutoRegCompress run it continues.
	AutoRegStage1 string

	// Device, when set, runs the steps on an accelerator (train/cuda's
	// Device) instead of the Go CPU path: BERT encoders fully fine-tuned
	// (any objective) and decoders under LoRA (Accelerator says what it
	// covers; the rest is refused). Checkpoints and the export are the same
	// files either way.
	Device Accelerator

	Seed            uint64
	Threads         int     // goroutines per op (≤ 0: GOMAXPROCS)
	EvalFraction    float64 // held-out share of the examples (default 0.05; negative: none)
	EvalEvery       int     // steps between evaluations (default 50)
	CheckpointEvery int     // steps between checkpoints (default 50)
	Resume          bool    // continue from OutDir/checkpoint when present
	NoExport        bool    // skip the export at the end
	Name            string  // exported model name (default: OutDir's base name)
	// ExportMaxLength is the max length recorded in the exported model's
	// manifest, i.e. what inference will use. 0: MaxLength for the
	// cross-encoder objectives (they score pairs as trained), else the import
	// path's default. A bi-encoder trained on short texts is usually served
	// at its base model's length (MiniLM: trained at 128, served at 256).
	ExportMaxLength int

	// Progress, when set, is called after every step and evaluation.
	Progress func(Progress)
}

// Progress reports a training run's state.
type Progress struct {
	Step, Steps  int
	Loss         float64 // mean over the step's micro-batches
	LR           float64
	GradNorm     float64
	ExamplesPerS float64 // queries per second
	ETA          time.Duration
	// Eval is set on evaluation reports.
	Eval *EvalResult
}

// EvalResult is the held-out loss and how often the positive scores above
// every negative of its own group.
type EvalResult struct {
	Loss     float64
	Accuracy float64
	Queries  int
}

// Result says what a run produced.
type Result struct {
	Steps      int
	FinalLoss  float64
	Checkpoint string // OutDir/checkpoint
	HFDir      string // trained Hugging Face checkpoint (LoRA merged)
	ModelDir   string // converted anna model (model.onnx + manifest); empty with NoExport
}

func (c *Config) defaults() error {
	if c.ModelDir == "" || c.Data == "" || c.OutDir == "" {
		return errors.New("train: ModelDir, Data and OutDir are required")
	}
	if c.Objective == "" {
		c.Objective = ObjectiveContrastive
	}
	switch c.Objective {
	case ObjectiveContrastive, ObjectiveBCE, ObjectiveListwise:
	default:
		return fmt.Errorf("train: objective %q unknown (want contrastive, bce or listwise)", c.Objective)
	}
	if c.Pooling == "" {
		c.Pooling = PoolMean
		if c.isDecoder() {
			c.Pooling = PoolLast
			if h := c.trainedHead(); h != nil { // an export with a pooling head goes on with it
				c.Pooling = h.Mode
			}
		} else if st := c.servedAs(); st.Pooling != "" {
			c.Pooling = st.Pooling // as the checkpoint is served (bge-small: CLS)
		}
	}
	switch c.Pooling {
	case PoolMean, PoolCLS, PoolLast, PoolLatent, PoolMultiLayer:
	default:
		return fmt.Errorf("train: pooling %q unknown (want mean, cls, lasttoken, latent or multilayer)", c.Pooling)
	}
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&c.MaxLength, 128)
	setInt(&c.BatchSize, 16)
	setInt(&c.GroupSize, 8)
	setInt(&c.Accum, 1)
	setInt(&c.Epochs, 1)
	setInt(&c.EvalEvery, 50)
	setInt(&c.CheckpointEvery, 50)
	if c.LoRA != nil {
		setF(&c.LR, 1e-4)
	}
	setF(&c.LR, 2e-5)
	setF(&c.WeightDecay, 0.01)
	setF(&c.Warmup, 0.1)
	setF(&c.ClipNorm, 1)
	setF(&c.Temperature, 0.05)
	setF(&c.TeacherTemperature, 1)
	setF(&c.EvalFraction, 0.05)
	if c.GroupSize < 2 {
		return fmt.Errorf("train: group size %d leaves no negatives (want ≥ 2)", c.GroupSize)
	}
	if c.Name == "" {
		c.Name = filepath.Base(c.OutDir)
	}
	return nil
}

// isDecoder reports whether ModelDir is a GGUF file or a decoder
// checkpoint (an unreadable config is loadSource's error to report).
func (c *Config) isDecoder() bool {
	if strings.HasSuffix(strings.ToLower(c.ModelDir), ".gguf") {
		return true
	}
	mc, err := model.LoadConfig(c.ModelDir)
	return err == nil && mc.IsDecoder()
}

// servedAs is what ModelDir's sentence-transformers files say of how the
// model is served (zero when it has none, or is a GGUF file).
func (c *Config) servedAs() model.STSettings {
	if strings.HasSuffix(strings.ToLower(c.ModelDir), ".gguf") {
		return model.STSettings{}
	}
	st, err := model.ReadSentenceTransformers(c.ModelDir)
	if err != nil || st.PoolingErr != nil {
		return model.STSettings{}
	}
	return st
}

// servedPrefixes gives a BERT bi-encoder's examples the prefixes the model
// is served with (its sentence-transformers prompts, which its export
// keeps): the query prefix where a line has no prompt of its own (bge's
// "Represent this sentence for searching relevant passages: "), the
// document prefix on every positive and negative, so that training sees
// the texts the encoder will embed.
func servedPrefixes(examples []Example, st model.STSettings) {
	for i := range examples {
		e := &examples[i]
		if e.Prompt == "" {
			e.Prompt = st.QueryPrefix
		}
		if st.DocumentPrefix == "" {
			continue
		}
		for _, docs := range [][]string{e.Pos, e.Neg} {
			for j := range docs {
				docs[j] = st.DocumentPrefix + docs[j]
			}
		}
	}
}

// trainedHead is the trainable pooling head ModelDir's config.json
// describes (an earlier export's), or nil.
func (c *Config) trainedHead() *model.PoolingHead {
	if strings.HasSuffix(strings.ToLower(c.ModelDir), ".gguf") {
		return nil
	}
	mc, err := model.LoadConfig(c.ModelDir)
	if err != nil {
		return nil
	}
	return mc.PoolingHead
}

// state.json in a checkpoint.
type runState struct {
	Step     int     `json:"step"`
	Steps    int     `json:"steps"`
	Loss     float64 `json:"loss"`
	Seed     uint64  `json:"seed"`
	Data     string  `json:"data"`
	Examples int     `json:"examples"`
}

// Run trains as cfg says and, unless NoExport, exports the result: the
// Hugging Face checkpoint in OutDir/hf and the anna model (model.onnx with a
// new fingerprint) in OutDir/model. Cancelling ctx stops at a step boundary
// after writing a checkpoint that Resume continues exactly. A NaN or
// infinite loss stops the run, keeping the last good checkpoint.
//
// Every optimizer step and held-out evaluation is recorded in
// OutDir/metrics.jsonl (MetricsFile); a resumed run drops what the file
// holds past its checkpoint's step and continues it, so each step is there
// once. OutDir/report.html (ReportFile), drawn from it by package report,
// is rewritten at every checkpoint, when the run stops and at the end.
// The held-out set, when there is one, is evaluated before training, every
// EvalEvery steps and at the end.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cross := cfg.Objective != ObjectiveContrastive
	examples, err := ReadExamples(cfg.Data, cfg.DistillWeight > 0)
	if err != nil {
		return nil, err
	}
	if cfg.LoRA != nil {
		lc := *cfg.LoRA // the caller's config stays as it was
		cfg.LoRA = &lc
	}
	src, err := loadSource(&cfg, cross)
	if err != nil {
		return nil, err
	}
	if !cross && src.bert != nil {
		servedPrefixes(examples, cfg.servedAs())
	}
	if cfg.Device != nil && cfg.Technique == "" { // a technique's decoder goes on the device below
		var dn *deviceNet
		if src.bert != nil {
			dn, err = onDevice(cfg.Device, src.bert)
		} else {
			dn, err = decoderOnDevice(cfg.Device, src.dec)
		}
		if err != nil {
			return nil, err
		}
		defer dn.close()
		src.net = dn
	}
	m := src.net
	tok, err := tokenizer.Load(src.tokPath)
	if err != nil {
		return nil, fmt.Errorf("train: the model dir needs tokenizer.json: %w", err)
	}
	defer tok.Close()
	if cfg.Technique != "" {
		prompts := map[string]string{}
		for _, e := range examples {
			if e.Prompt != "" {
				prompts[e.Prompt+e.Query] = e.Prompt
			}
		}
		tn, err := newTechnique(&cfg, src.dec, tok, prompts)
		if err != nil {
			return nil, err
		}
		if tn.context != nil {
			defer tn.context.Close()
		}
		m, src.net, src.technique = tn, tn, tn.t
		if cfg.Device != nil {
			dt, err := techniqueOnDevice(cfg.Device, tn)
			if err != nil {
				return nil, err
			}
			defer dt.close()
			m = dt
		}
	}

	// Held-out split: a seeded shuffle, the tail held out.
	order := rand.New(rand.NewPCG(cfg.Seed, 0xe7a1)).Perm(len(examples))
	nEval := 0
	if cfg.EvalFraction > 0 && len(examples) >= 20 {
		nEval = max(1, int(float64(len(examples))*cfg.EvalFraction))
	}
	var trainEx, evalEx []Example
	for i, j := range order {
		if i < len(order)-nEval {
			trainEx = append(trainEx, examples[j])
		} else {
			evalEx = append(evalEx, examples[j])
		}
	}
	perStep := cfg.BatchSize * cfg.Accum
	stepsPerEpoch := max(1, len(trainEx)/perStep)
	steps := stepsPerEpoch * cfg.Epochs
	if cfg.MaxSteps > 0 {
		steps = cfg.MaxSteps
	}
	warmup := int(cfg.Warmup * float64(steps))

	opt := NewAdamW(cfg.WeightDecay)
	store := residentOf(m) // where the weights live: the host, or a device
	ckptDir := filepath.Join(cfg.OutDir, "checkpoint")
	save := func(st runState) error {
		if err := store.toHost(opt); err != nil {
			return err
		}
		return saveCheckpoint(ckptDir, m.params(), opt, st)
	}
	start := 0
	if cfg.Resume {
		st, err := loadCheckpoint(ckptDir, m.params(), opt)
		switch {
		case errors.Is(err, errNoCheckpoint):
		case err != nil:
			return nil, err
		default:
			if st.Seed != cfg.Seed || st.Examples != len(examples) {
				return nil, fmt.Errorf("train: checkpoint %s was made with seed %d over %d examples; this run has seed %d over %d: resuming would not continue the same run", ckptDir, st.Seed, st.Examples, cfg.Seed, len(examples))
			}
			if err := store.fromHost(opt); err != nil {
				return nil, err
			}
			start = st.Step
		}
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	tr := &trainer{cfg: &cfg, m: m, tok: tok}
	if cross {
		tr.cross = src.bert
		if dn, ok := m.(*deviceNet); ok {
			tr.cross = dn
		}
	}
	res := &Result{Checkpoint: ckptDir}
	// The metrics file goes on from the checkpoint's step; its elapsed
	// times go on from the last one recorded.
	mlog, err := report.OpenMetricsLog(filepath.Join(cfg.OutDir, MetricsFile), start)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer mlog.Close()
	kept := mlog.Metrics()
	t0 := time.Now()
	elapsed := func() float64 { return kept.ElapsedS() + time.Since(t0).Seconds() }
	lastLoss := math.NaN()
	evaluate := func(step int) error {
		ev, err := tr.evaluate(evalEx)
		if err != nil {
			return err
		}
		if err := mlog.AddEval(report.Eval{Step: step, Loss: ev.Loss, Accuracy: ev.Accuracy, Queries: ev.Queries, ElapsedS: elapsed()}); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if cfg.Progress != nil {
			cfg.Progress(Progress{Step: step, Steps: steps, Eval: ev})
		}
		return nil
	}
	evalDue := func(step int) bool {
		return len(evalEx) > 0 && (step == 0 || step%cfg.EvalEvery == 0 || step == steps)
	}
	// The baseline the later evaluations compare with (step 0), or one a
	// stopped run saved the checkpoint for but did not record.
	if evalDue(start) && (len(kept.Evals) == 0 || kept.Evals[len(kept.Evals)-1].Step != start) {
		if err := evaluate(start); err != nil {
			return nil, err
		}
	}
	for step := start; step < steps; step++ {
		if err := ctx.Err(); err != nil {
			if step > start {
				if err := save(runState{Step: step, Steps: steps, Loss: lastLoss, Seed: cfg.Seed, Data: cfg.Data, Examples: len(examples)}); err != nil {
					return nil, err
				}
			}
			if err := cfg.writeReport(steps, mlog.Metrics()); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("train: stopped at step %d of %d (checkpoint in %s; run again with resume): %w", step, steps, ckptDir, err)
		}
		t1 := time.Now()
		m.zeroGrad()
		var loss float64
		var parts objective.Parts
		for micro := 0; micro < cfg.Accum; micro++ {
			// Which examples this micro-batch uses depends only on the step.
			global := (step*cfg.Accum + micro) * cfg.BatchSize
			epoch := global / (stepsPerEpoch * perStep)
			perm := rand.New(rand.NewPCG(cfg.Seed, uint64(epoch)+1)).Perm(len(trainEx))
			var gs []group
			for i := 0; i < cfg.BatchSize; i++ {
				k := (global + i) % (stepsPerEpoch * perStep) % len(trainEx)
				gs = append(gs, sampleGroup(&trainEx[perm[k]], cfg.GroupSize, cfg.Seed, uint64(global+i)))
			}
			l, err := tr.grad(gs, float32(1/float64(cfg.Accum)), true)
			if err != nil {
				return nil, fmt.Errorf("train: step %d: %w", step+1, err)
			}
			loss += l / float64(cfg.Accum)
			parts.InfoNCE += tr.parts.InfoNCE / float64(cfg.Accum)
			parts.Distill += tr.parts.Distill / float64(cfg.Accum)
		}
		norm, err := store.clip(cfg.ClipNorm)
		if err != nil {
			return nil, fmt.Errorf("train: step %d: %w", step+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
			err := fmt.Errorf("train: loss became %v (gradient norm %v) at step %d: stopped without updating; the last good checkpoint is %s (lower the learning rate or raise the temperature)", loss, norm, step+1, ckptDir)
			return nil, errors.Join(err, cfg.writeReport(steps, mlog.Metrics()))
		}
		lr := LinearSchedule(step, warmup, steps, cfg.LR)
		if err := store.update(opt, lr); err != nil {
			return nil, fmt.Errorf("train: step %d: %w", step+1, err)
		}
		lastLoss = loss
		done := step + 1
		rec := report.Step{Step: done, Loss: loss, LR: lr, GradNorm: norm, ExamplesPerS: float64(perStep) / time.Since(t1).Seconds(), ElapsedS: elapsed()}
		if cfg.DistillWeight > 0 {
			rec.Contrastive, rec.Distillation = &parts.InfoNCE, &parts.Distill
		}
		if err := mlog.AddStep(rec); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if cfg.Progress != nil {
			el := time.Since(t0)
			rate := float64((done-start)*perStep) / el.Seconds()
			eta := time.Duration(float64(el) / float64(done-start) * float64(steps-done))
			cfg.Progress(Progress{Step: done, Steps: steps, Loss: loss, LR: lr, GradNorm: norm, ExamplesPerS: rate, ETA: eta})
		}
		saved := done%cfg.CheckpointEvery == 0 || done == steps
		if saved {
			if err := save(runState{Step: done, Steps: steps, Loss: loss, Seed: cfg.Seed, Data: cfg.Data, Examples: len(examples)}); err != nil {
				return nil, err
			}
		}
		if evalDue(done) {
			if err := evaluate(done); err != nil {
				return nil, err
			}
		}
		if saved && done < steps {
			if err := cfg.writeReport(steps, mlog.Metrics()); err != nil {
				return nil, err
			}
		}
	}
	if err := cfg.writeReport(steps, mlog.Metrics()); err != nil {
		return nil, err
	}
	res.Steps, res.FinalLoss = steps, lastLoss
	if err := store.toHost(opt); err != nil { // for the export
		return nil, err
	}
	if c2v, ok := src.technique.(*causal2vec.Technique); ok {
		// Its MLP and the pairing, beside the checkpoint (which holds the
		// decoder's weights); then, unless NoExport, the anna model the
		// encoder serves (decoder and MLP in one graph, paired with the
		// context encoder).
		res.HFDir = filepath.Join(cfg.OutDir, "causal2vec")
		if err := c2v.Save(res.HFDir); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if cfg.NoExport {
			return res, nil
		}
		pair := &model.ContextModel{Name: cfg.ContextEncoderName, Path: cfg.ContextEncoderPath, Fingerprint: cfg.ContextEncoderFingerprint, Dim: cfg.ContextEncoderDim}
		if ce, ok := c2v.Enc.(*contextEncoder); ok {
			// The trained context encoder first: the decoder is paired
			// with it, by its path and new fingerprint.
			if pair, err = exportContext(ctx, ce, cfg); err != nil {
				return nil, err
			}
		}
		es := ExportSettings{Name: cfg.Name, MaxLength: cfg.exportMaxLength(m.positions()), Context: pair}
		if res.HFDir, res.ModelDir, err = ExportCausal2Vec(ctx, c2v, src.dir, cfg.OutDir, es); err != nil {
			return nil, err
		}
		return res, nil
	}
	if ar, ok := src.technique.(*autoregembed.Technique); ok {
		// The encoder and memory tokens for the next stage, then, unless
		// NoExport, the anna model the encoder serves.
		if res.HFDir, err = saveAutoReg(ar, cfg.OutDir); err != nil {
			return nil, err
		}
		if cfg.NoExport {
			return res, nil
		}
		es := ExportSettings{Name: cfg.Name, MaxLength: cfg.exportMaxLength(m.positions()), Memory: &model.MemoryTokens{
			Count: ar.Memory().Shape[0], QueryInstruction: "\n" + autoRegNext + "\n", DocumentInstruction: "\n" + autoRegSelf + "\n"}}
		if res.HFDir, res.ModelDir, err = ExportAutoRegEmbed(ctx, ar, src.dir, cfg.OutDir, es); err != nil {
			return nil, err
		}
		return res, nil
	}
	if cfg.NoExport {
		return res, nil
	}
	es := ExportSettings{Name: cfg.Name, Pooling: cfg.Pooling, MaxLength: cfg.exportMaxLength(m.positions())}
	var hf, dir string
	if src.dec != nil {
		hf, dir, err = ExportDecoder(ctx, src.dec, src.dir, cfg.OutDir, es)
	} else {
		hf, dir, err = Export(ctx, src.bert, src.dir, cfg.OutDir, es)
	}
	if err != nil {
		return nil, err
	}
	res.HFDir, res.ModelDir = hf, dir
	return res, nil
}

// trainer turns groups into batches and runs the objective.
type trainer struct {
	cfg   *Config
	m     net
	cross crossNet // the cross-encoder objectives' model (BERT only)
	tok   *tokenizer.Tokenizer
	// After grad: a contrastive loss's terms (backward), or how many
	// queries ranked their positive first (evaluation).
	parts   objective.Parts
	correct int
}

func (tr *trainer) batch(encs []tokenizer.Encoding) *Batch { return padBatch(encs, tr.tok.PadID()) }

// padBatch pads encodings into one right-padded batch.
func padBatch(encs []tokenizer.Encoding, padID int64) *Batch {
	ids, types, mask, T := tokenizer.Pad(encs, padID)
	b := &Batch{N: len(encs), T: T, IDs: make([]int32, len(ids)), Types: make([]int32, len(ids)), Mask: make([]float32, len(ids))}
	for i := range ids {
		b.IDs[i], b.Types[i], b.Mask[i] = int32(ids[i]), int32(types[i]), float32(mask[i])
	}
	return b
}

// grad computes the loss of the groups and, when backward, adds scale × its
// gradient to the params.
func (tr *trainer) grad(gs []group, scale float32, backward bool) (float64, error) {
	cfg := tr.cfg
	Q, G := len(gs), cfg.GroupSize
	if cfg.Objective == ObjectiveContrastive {
		texts := make([]string, 0, Q*(G+1))
		// Teacher scores for the whole batch or none: data may mix
		// examples with scores (mined) and without (pairs, NLI) when
		// distillation is off (with it on, ReadExamples wants them all).
		var teacher []float32
		for _, g := range gs {
			texts = append(texts, g.query)
		}
		for _, g := range gs {
			texts = append(texts, g.docs...)
			teacher = append(teacher, g.teacher...) // G scores or none (sampleGroup)
		}
		if len(teacher) != Q*G {
			teacher = nil
		}
		b := tr.batch(tr.tok.EncodeBatch(texts, cfg.MaxLength))
		b.Texts = texts
		cc := ContrastiveConfig{Temperature: cfg.Temperature, InBatch: !cfg.NoInBatch, DistillWeight: cfg.DistillWeight, TeacherTemperature: cfg.TeacherTemperature}
		if !backward {
			l, correct, err := tr.m.evalContrastive(b, Q, G, cfg.Pooling, teacher, cc)
			tr.correct = correct
			return l, err
		}
		l, parts, err := tr.m.contrastiveGrad(b, Q, G, cfg.Pooling, teacher, cc, scale)
		tr.parts = parts
		return l, err
	}
	var encs []tokenizer.Encoding
	var labels, teacher []float32
	for _, g := range gs {
		for k, d := range g.docs {
			encs = append(encs, tr.tok.EncodePair(g.query, d, cfg.MaxLength))
			labels = append(labels, float32(b2f(k == 0)))
		}
		teacher = append(teacher, g.teacher...)
	}
	if len(teacher) != Q*G {
		teacher = nil
	}
	b := tr.batch(encs)
	cc := CrossConfig{DistillWeight: cfg.DistillWeight, TeacherTemperature: cfg.TeacherTemperature}
	if !backward {
		l, correct, err := tr.cross.evalCross(b, cfg.Objective, labels, teacher, cc, Q, G)
		tr.correct = correct
		return l, err
	}
	l, parts, err := tr.cross.crossGrad(b, cfg.Objective, labels, teacher, cc, Q, G, scale)
	tr.parts = parts
	return l, err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// evaluate computes the held-out loss and accuracy, in batches.
func (tr *trainer) evaluate(ex []Example) (*EvalResult, error) {
	cfg := tr.cfg
	ev := &EvalResult{}
	var correct int
	for lo := 0; lo < len(ex); lo += cfg.BatchSize {
		hi := min(len(ex), lo+cfg.BatchSize)
		var gs []group
		for i := lo; i < hi; i++ {
			gs = append(gs, sampleGroup(&ex[i], cfg.GroupSize, cfg.Seed, uint64(1<<40+i)))
		}
		l, err := tr.grad(gs, 0, false)
		if err != nil {
			return nil, fmt.Errorf("train: evaluation: %w", err)
		}
		ev.Loss += l * float64(hi-lo)
		correct += tr.correct
	}
	ev.Queries = len(ex)
	ev.Loss /= float64(len(ex))
	ev.Accuracy = float64(correct) / float64(len(ex))
	return ev, nil
}

// saveCheckpoint writes the trained params, the optimizer moments and the
// state to dir atomically (a temporary directory renamed over the old
// one). Frozen params (LoRA's base, kept compact or not) are left out: a
// resumed run loads them from the model again, as the first run did.
func saveCheckpoint(dir string, ps []*Param, opt *AdamW, st runState) error {
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	params, moments := map[string]*safetensors.Tensor{}, map[string]*safetensors.Tensor{}
	for _, p := range ps {
		if p.Frozen {
			continue
		}
		params[p.Name] = &safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: p.W}
		if mm, ok := opt.m[p]; ok {
			moments["m."+p.Name] = &safetensors.Tensor{Name: "m." + p.Name, Shape: p.Shape, Data: mm}
			moments["v."+p.Name] = &safetensors.Tensor{Name: "v." + p.Name, Shape: p.Shape, Data: opt.v[p]}
		}
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "params.safetensors"), params, nil); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if len(moments) > 0 {
		if err := safetensors.WriteFile(filepath.Join(tmp, "optimizer.safetensors"), moments, map[string]string{"step": fmt.Sprint(opt.Step)}); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	sb, _ := json.MarshalIndent(struct {
		runState
		OptimizerStep int `json:"optimizer_step"`
	}{st, opt.Step}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "state.json"), sb, 0o644); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	old := dir + ".old"
	os.RemoveAll(old)
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	os.RemoveAll(old)
	return nil
}

// errNoCheckpoint: there is no checkpoint to resume (no state.json).
var errNoCheckpoint = errors.New("train: no checkpoint")

// loadCheckpoint restores params and optimizer state saved by
// saveCheckpoint. Only a missing state.json means "no checkpoint"
// (errNoCheckpoint); a checkpoint that has one but lacks a file it names is
// an error, never a fresh start over the progress it holds.
func loadCheckpoint(dir string, ps []*Param, opt *AdamW) (runState, error) {
	var st struct {
		runState
		OptimizerStep int `json:"optimizer_step"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st.runState, errNoCheckpoint
	}
	if err != nil {
		return st.runState, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st.runState, fmt.Errorf("train: checkpoint %s/state.json: %w", dir, err)
	}
	params, err := safetensors.ReadFile(filepath.Join(dir, "params.safetensors"))
	if err != nil {
		return st.runState, fmt.Errorf("train: checkpoint: %w", err)
	}
	var moments map[string]*safetensors.Tensor
	if st.OptimizerStep > 0 {
		if moments, err = safetensors.ReadFile(filepath.Join(dir, "optimizer.safetensors")); err != nil {
			return st.runState, fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	for _, p := range ps {
		if p.Frozen {
			continue // not saved (an older checkpoint has it, unchanged)
		}
		t, ok := params[p.Name]
		if !ok || len(t.Data) != len(p.W) {
			return st.runState, fmt.Errorf("train: checkpoint %s does not match the model: tensor %s missing or misshapen (was it made with other LoRA settings?)", dir, p.Name)
		}
		copy(p.W, t.Data)
		if mt, ok := moments["m."+p.Name]; ok {
			mm, vv := opt.moments(p)
			copy(mm, mt.Data)
			copy(vv, moments["v."+p.Name].Data)
		}
	}
	opt.Step = st.OptimizerStep
	return st.runState, nil
}

// exportMaxLength picks the served max length, never past the model's
// position embeddings (0 leaves it to the import path).
func (c Config) exportMaxLength(positions int) int {
	n := c.ExportMaxLength
	if n <= 0 && (c.Objective == "bce" || c.Objective == "listwise") {
		n = c.MaxLength
	}
	if positions > 0 && n > positions {
		n = positions
	}
	return n
}
