package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
)

func init() {
	register(command{
		name:    "models",
		summary: "import a Hugging Face BERT checkpoint to ONNX; list or show installed models",
		run:     runModels,
	})
}

func runModels(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: annactl models import|list|show [flags]")
		return errUsage
	}
	switch args[0] {
	case "import":
		return modelsImport(ctx, args[1:])
	case "list":
		return modelsList(args[1:])
	case "show":
		return modelsShow(args[1:])
	default:
		fmt.Fprintf(os.Stderr, "annactl models: unknown subcommand %q (want import, list or show)\n", args[0])
		return errUsage
	}
}

func modelsImport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("models import", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: annactl models import [flags] SRC_DIR DEST_DIR\n\n"+
			"Converts a Hugging Face BERT checkpoint (config.json, *.safetensors, tokenizer.json,\n"+
			"optional sentence-transformers files) to DEST_DIR/{model.onnx,tokenizer.json,config.json,anna-model.json}.\n"+
			"Flags override what the sentence-transformers files say.\n\nflags:")
		fs.PrintDefaults()
	}
	var s onnx.Settings
	fs.StringVar(&s.Name, "name", "", "model name (default: DEST_DIR's base name)")
	fs.StringVar(&s.Task, "task", model.TaskEmbed, "embed (bi-encoder, outputs last_hidden_state) or rerank (cross-encoder, outputs logits)")
	fs.StringVar(&s.Pooling, "pooling", "", "mean, cls or lasttoken (default: the checkpoint's Pooling module, else mean)")
	fs.IntVar(&s.MaxLength, "max-length", 0, "maximum tokens per input (default: sentence_bert_config.json, else min(512, max_position_embeddings))")
	normalize := fs.Bool("normalize", true, "L2-normalise embeddings (default: the checkpoint's Normalize module, else true)")
	fs.StringVar(&s.QueryPrefix, "query-prefix", "", "text prepended to every query")
	fs.StringVar(&s.DocumentPrefix, "document-prefix", "", "text prepended to every document")
	fs.StringVar(&s.InstructionTemplate, "instruction-template", "", "query template with {task} and {query} (default "+fmt.Sprintf("%q", model.DefaultInstructionTemplate)+")")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "normalize" {
			s.Normalize = normalize
		}
	})
	if fs.NArg() != 2 {
		fs.Usage()
		return errUsage
	}
	src, dest := fs.Arg(0), fs.Arg(1)
	m, err := onnx.Import(ctx, src, dest, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "imported %s → %s (task %s, dim %d, max length %d, pooling %q, normalize %t, fingerprint %s)\n",
		src, dest, m.Task, m.Dim, m.MaxLength, m.Pooling, m.Normalize, m.ShortFingerprint())
	return nil
}

func modelsList(args []string) error {
	fs := flag.NewFlagSet("models list", flag.ContinueOnError)
	dir := fs.String("dir", home.ModelsDir(), "models directory")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	entries, err := os.ReadDir(*dir)
	if err != nil {
		return fmt.Errorf("listing models: %w", err)
	}
	names := []string{}
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		m, err := model.LoadManifest(filepath.Join(*dir, n))
		if err != nil {
			fmt.Printf("%-28s (not a converted model: %v)\n", n, err)
			continue
		}
		fmt.Printf("%-28s %-6s dim %-5d max %-4d %-9s fingerprint %s\n", n, m.Task, m.Dim, m.MaxLength, m.Pooling, m.ShortFingerprint())
	}
	return nil
}

func modelsShow(args []string) error {
	fs := flag.NewFlagSet("models show", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	dir := home.DefaultModel()
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
		if _, err := os.Stat(dir); err != nil && !filepath.IsAbs(dir) {
			dir = filepath.Join(home.ModelsDir(), dir)
		}
	}
	m, err := model.LoadManifest(dir)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}
