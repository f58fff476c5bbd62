package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// reindexOptions are reindex's flags.
type reindexOptions struct {
	dir, model string
	batch      int
	cache      bool
	chunks     chunkFlags
	be         backendFlags

	chunking *engine.Chunking // the chunking flags, read
	engine   engine.Options   // but Logf
}

func (a *app) reindexCommand() *cobra.Command {
	var o reindexOptions
	cmd := &cobra.Command{
		Use:   "reindex --index DIR [--model NEW_MODEL_DIR] [--chunk-tokens N | --no-chunking]",
		Short: "re-encode every document with a new model and swap the dense index",
		Long: `Re-encodes every document of the anna directory with the new model (for example
the output of annactl train), builds a new HNSW graph and switches to both at once.
Searches keep working on the old model until then; the BM25 index is untouched.
An interrupted run resumes: vectors already computed for the new model are kept.
A model directory that is not installed is first copied under $ANNA_HOME/models
(as annactl models add DIR does, named NAME-FINGERPRINT), where the index finds it
by fingerprint: moving or deleting DIR afterwards breaks nothing.

With --chunk-tokens, --chunk-stride or --no-chunking it also changes how long
documents are split (see annactl index -h); without --model it then re-encodes
with the directory's own model.`,
		Example: `  annactl reindex --index my-index --model ft/model
  annactl reindex --index my-index --chunk-tokens 128 --chunk-stride 64`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return a.runReindex(cmd.Context(), o)
		},
	}
	indexFlag(cmd, &o.dir, "anna directory `DIR`")
	modelVar(cmd.Flags(), &o.model, "model", "", "the new model directory `DIR` (e.g. the output of annactl train), or URL#NAME of a model another server runs (OpenAI-compatible /v1/embeddings; key in $ANNA_MODEL_API_KEY)")
	cmd.Flags().IntVar(&o.batch, "batch", 256, "documents embedded per batch")
	cmd.Flags().BoolVar(&o.cache, "cache", true, cacheUsage)
	o.chunks.register(cmd)
	o.be.register(cmd)
	return cmd
}

// check validates the flags and makes the engine options.
func (o *reindexOptions) check(cmd *cobra.Command) error {
	if err := requireFlags(cmd, "index"); err != nil {
		return err
	}
	var err error
	if o.chunking, err = o.chunks.chunking(cmd); err != nil {
		return err
	}
	if o.model == "" && o.chunking == nil {
		return usageErrorf("give --model NEW_MODEL_DIR, or a chunking flag to re-split with the current model")
	}
	if err := atLeast("batch", o.batch, 1); err != nil {
		return err
	}
	o.engine = engine.Options{KeepModel: true, MaxPassages: o.chunks.maxPassages}
	return o.be.apply(cmd, &o.engine)
}

// runReindex re-encodes o.dir with the new model (or chunking) and says
// what changed on a's stderr.
func (a *app) runReindex(ctx context.Context, o reindexOptions) error {
	pl := &progressLog{a: a} // the engine's messages on lines of their own
	eopts := o.engine
	eopts.Logf = pl.logf
	eng, err := engine.Open(ctx, o.dir, eopts)
	if err != nil {
		return err
	}
	defer eng.Close()
	model := o.model
	if model == "" {
		// The directory's own model, wherever it is now.
		if model, err = engine.FindModel(eng.Model()); err != nil {
			return err
		}
	}
	abs := model
	if !encoder.IsRemote(model) {
		if abs, err = filepath.Abs(model); err != nil {
			return err
		}
	}
	old, oldCh := eng.Model().Label(), eng.Chunking()
	ropts := engine.ReindexOptions{Model: abs, BatchSize: o.batch, Chunking: o.chunking}
	if o.cache {
		enc, err := encoder.Open(ctx, abs, encoder.Options{})
		if err != nil {
			return err
		}
		defer enc.Close()
		if ropts.Encoder, err = encoder.NewCache(enc, home.EmbeddingCacheDir()); err != nil {
			return err
		}
	}
	p := a.progress("re-encoding", 0)
	ropts.Progress = func(done, total int) {
		p.total = total
		pl.update(p, done, "docs")
	}
	err = eng.Reindex(ctx, ropts)
	pl.done(p)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "reindexed %s: model %s -> %s, chunking %s -> %s\n", o.dir, old, eng.Model().Label(), oldCh, eng.Chunking())
	if st, err := eng.Stats(); err == nil && st.FusionChoice.Fusion != "" && !st.FusionChoice.Active(st.Model.Fingerprint) {
		fmt.Fprintf(a.stderr, "hybrid fuses by dbsf (the default) again: the index's choice, %s, was measured with the old model (annactl eval DATASET --index %s --split train --choose-fusion chooses for this one)\n", st.FusionChoice.Fusion, o.dir)
	}
	return nil
}
