package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

func (a *app) statsCommand() *cobra.Command {
	var dir string
	var asJSON bool
	var be backendFlags
	cmd := &cobra.Command{
		Use:   "stats --index DIR",
		Short: "show the counts and the model of an anna directory (read-only)",
		Long: `Shows the counts and the model of an anna directory without changing it. When
opening it found damage (a damaged bbolt meta page, an index ahead of the store or
built from another one), stats says so and exits 1: run annactl check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "index"); err != nil {
				return err
			}
			opts := engine.Options{ReadOnly: true, Logf: a.logf}
			if err := be.apply(cmd, &opts); err != nil {
				return err
			}
			eng, err := engine.Open(cmd.Context(), dir, opts)
			if err != nil {
				return err
			}
			defer eng.Close()
			st, err := eng.Stats()
			if err != nil {
				return err
			}
			if len(st.Warnings) > 0 {
				defer fmt.Fprintf(a.stderr, "annactl stats: damage found (see the warnings): run `annactl check --index %s`\n", dir)
				err = exitError{1}
			}
			if asJSON {
				if jerr := json.NewEncoder(a.stdout).Encode(jsonStats{
					Dir: st.Dir, Documents: st.Documents, Seq: st.Seq, Model: st.Model.Fingerprint, ModelName: st.Model.Name, ModelDir: st.Model.Dir,
					Dim: st.Model.Dim, LexicalDocs: st.LexicalDocs, LexicalSeq: st.LexicalSeq, LexicalStale: st.LexicalStale,
					DenseDocs: st.DenseDocs, DensePassages: st.DensePassages, Chunking: st.Chunking.String(), DenseSeq: st.DenseSeq, Backend: st.Backend, Warnings: st.Warnings,
					Inference: encoder.DefaultBackend(), Tokenizer: tokenizerImpl,
					Fusion: string(st.Fusion), FusionChoice: fusionChoiceJSON(st.FusionChoice, st.Model.Fingerprint),
					Precision: modelPrecision(st.Model),
				}); jerr != nil {
					return jerr
				}
				return err
			}
			md := st.Model.Dir
			if md == "" {
				md = "(default)"
			}
			name := st.Model.Name
			if name == "" {
				name = "(unknown)"
			}
			fmt.Fprintf(a.stdout, "directory      %s\ndocuments      %d\nchange seq     %d\nmodel          %s\nfingerprint    %s\nmodel dir      %s\ndimensions     %d\nBM25 docs      %d (applied seq %d)\ndense docs     %d, %d passages (applied seq %d)\nchunking       %s\n",
				st.Dir, st.Documents, st.Seq, name, st.Model.Fingerprint, md, st.Model.Dim, st.LexicalDocs, st.LexicalSeq, st.DenseDocs, st.DensePassages, st.DenseSeq, st.Chunking)
			if p := modelPrecision(st.Model); p != "" {
				fmt.Fprintf(a.stdout, "precision      %s\n", p)
			}
			if note := staleInt8(st.Model, dir); note != "" {
				fmt.Fprintf(a.stdout, "note           %s\n", note)
			}
			fmt.Fprintf(a.stdout, "backend        %s\n", st.Backend)
			fmt.Fprintf(a.stdout, "runtime        %s\n", runtimeLine())
			fmt.Fprintf(a.stdout, "fusion         %s\n", fusionLine(st))
			if st.LexicalStale != "" {
				fmt.Fprintf(a.stdout, "BM25 index     %s\n", st.LexicalStale)
			}
			for _, w := range st.Warnings {
				fmt.Fprintf(a.stdout, "warning        %s\n", w)
			}
			return err
		},
	}
	indexFlag(cmd, &dir, "anna directory `DIR`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	be.register(cmd)
	return cmd
}

type jsonStats struct {
	Dir           string            `json:"dir"`
	Documents     int               `json:"documents"`
	Seq           uint64            `json:"seq"`
	Model         string            `json:"model_fingerprint"`
	ModelName     string            `json:"model_name,omitempty"`
	Precision     string            `json:"precision,omitempty"`     // the model's weights: float32, int8, int4
	Fusion        string            `json:"fusion"`                  // what hybrid search fuses by
	FusionChoice  *jsonFusionChoice `json:"fusion_choice,omitempty"` // recorded by eval --choose-fusion
	ModelDir      string            `json:"model_dir"`
	Dim           int               `json:"dim"`
	LexicalDocs   uint64            `json:"lexical_docs"`
	LexicalSeq    uint64            `json:"lexical_seq"`
	LexicalStale  string            `json:"lexical_stale,omitempty"`
	DenseDocs     int               `json:"dense_docs"`
	DensePassages int               `json:"dense_passages"`
	Chunking      string            `json:"chunking"`
	DenseSeq      uint64            `json:"dense_seq"`
	Backend       string            `json:"backend"`
	Inference     string            `json:"inference"` // the encoder's backend: onnxruntime or go
	Tokenizer     string            `json:"tokenizer"` // native or pure
	Warnings      []string          `json:"warnings,omitempty"`
}

// fusionLine says what hybrid search fuses by, and why.
func fusionLine(st engine.Stats) string {
	c := st.FusionChoice
	switch {
	case c.Fusion == "":
		return string(engine.DefaultFusion) + " (the default; annactl eval --choose-fusion measures the others)"
	case c.Active(st.Model.Fingerprint):
		return fmt.Sprintf("%s, the index's choice (%s)", c.Fusion, c.Why)
	}
	return fmt.Sprintf("%s: %s was chosen for model %s, not this index's %s (run annactl eval --choose-fusion again)", engine.DefaultFusion, c.Fusion, c.Model, st.Model.Fingerprint)
}

// jsonFusionChoice is stats --json's "fusion_choice".
type jsonFusionChoice struct {
	Fusion string `json:"fusion"`
	Model  string `json:"model_fingerprint"`
	Why    string `json:"why"`
	Active bool   `json:"active"`
}

func fusionChoiceJSON(c engine.FusionChoice, fp string) *jsonFusionChoice {
	if c.Fusion == "" {
		return nil
	}
	return &jsonFusionChoice{Fusion: string(c.Fusion), Model: c.Model, Why: c.Why, Active: c.Active(fp)}
}

// staleInt8 says what to do about an index built with an int8 BERT model
// converted before issue 64 (Manifest.Activations ""), whose vectors
// depend on the other texts of their batch; "" for any other model. The
// index keeps working with it as it is.
func staleInt8(m engine.Model, index string) string {
	man := indexManifest(m)
	if man == nil || man.Quantization != model.QuantizeInt8 || man.Activations != "" || man.Architecture != "bert" {
		return ""
	}
	return fmt.Sprintf("%s is an int8 conversion from before per-row activations (a text's vector moved a little with its batch); it serves this index as it is: `annactl reindex --index %s --model %s` moves the index to this build's conversion", m.Label(), index, man.Name)
}

// modelPrecision is the precision of m's weights as its manifest says
// (float32, int8, int4), or "" when the model is not found here.
func modelPrecision(m engine.Model) string {
	man := indexManifest(m)
	if man == nil {
		return ""
	}
	if man.Quantization == "" {
		return catalog.PrecisionFloat32
	}
	return man.Quantization
}

// indexManifest is the manifest of m, an index's model, where it is found
// here (engine.FindModel); nil when it is not.
func indexManifest(m engine.Model) *model.Manifest {
	if m.Fingerprint == "" {
		return nil
	}
	dir, err := engine.FindModel(m)
	if err != nil {
		return nil
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return nil
	}
	return man
}
