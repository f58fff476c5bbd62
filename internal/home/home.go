// Package home resolves where anna keeps installed files: $ANNA_HOME, or
// ~/.cache/anna when it is unset. The library, the CLI and the tests all use it
// so that the default model and ONNX Runtime are found without flags. Dir is
// the one resolver in Go (the installer, internal/setup, writes where it
// says); the Makefile defaults to the same folder ($HOME/.cache/anna), on
// every OS and whatever $XDG_CACHE_HOME says, so what its targets install
// is where Dir looks.
package home

import (
	"fmt"
	"os"
	"path/filepath"
)

// SetupHint says how to install what anna needs into Dir: the installer
// (internal/setup) run through cmd/anna-env, which works from any module
// that depends on anna (`make setup` runs the same command in a checkout).
const SetupHint = "install it with `go run github.com/anna-search/anna/cmd/anna-env setup`"

// Versions the installer (internal/setup: `anna-env setup`, `make setup`)
// pins; it takes them from here.
const (
	ORTVersion        = "1.24.1"
	DefaultModelName  = "all-MiniLM-L6-v2"
	TokenizersVersion = "v1.22.1" // github.com/daulet/tokenizers, built into libtokenizers.a
)

// Dir returns the anna home directory: $ANNA_HOME, else ~/.cache/anna
// (os.TempDir()/anna when the home directory is unknown).
func Dir() string {
	if d := os.Getenv("ANNA_HOME"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "anna")
	}
	return filepath.Join(os.TempDir(), "anna")
}

// ORTLibrary is the path of the ONNX Runtime shared library. ANNA_ORT_LIB
// overrides it.
func ORTLibrary() string {
	if p := os.Getenv("ANNA_ORT_LIB"); p != "" {
		return p
	}
	return filepath.Join(Dir(), "onnxruntime", ORTVersion, "libonnxruntime.so.1")
}

// TokenizersLibDir holds libtokenizers.a, which programs using anna link
// (cgo: -L this directory).
func TokenizersLibDir() string { return filepath.Join(Dir(), "lib", "tokenizers-"+TokenizersVersion) }

// ModelsDir is where converted models live, one directory each.
func ModelsDir() string { return filepath.Join(Dir(), "models") }

// DefaultModel is the directory of the default embedding model as
// converted (float32): what trains, and what its int8 form is converted
// from.
func DefaultModel() string { return filepath.Join(ModelsDir(), DefaultModelName) }

// DefaultEmbedName is the catalogue entry that embeds when a program names
// no model — the engine's zero Options, annactl embed, annactl index, the
// server — so that all of them give the same vectors, and
// DefaultModelQuantization the form it embeds in: its int8 graph, measured
// to keep the float32 one's retrieval quality at about half its CPU time.
// The entry is chosen by measurement (docs/results/models.md); the
// installer puts both its forms under ModelsDir, beside DefaultModel's.
const (
	DefaultEmbedName         = DefaultModelName
	DefaultModelQuantization = "int8"
)

// DefaultEmbedModel is the directory of the model that embeds when none is
// named: DefaultEmbedName's DefaultModelQuantization form (NAME-int8).
func DefaultEmbedModel() string {
	return filepath.Join(ModelsDir(), DefaultEmbedName+"-"+DefaultModelQuantization)
}

// SourceDir is where the untouched downloaded packages are unpacked.
func SourceDir() string { return filepath.Join(Dir(), "src") }

// DownloadsDir keeps the archives `annactl models install` downloaded.
func DownloadsDir() string { return filepath.Join(Dir(), "downloads") }

// CacheDir holds derived caches (embedding cache for tests, evals, benchmarks).
func CacheDir() string { return filepath.Join(Dir(), "cache") }

// EmbeddingCacheDir holds the embedding cache (encoder.Cache): one file per
// model fingerprint.
func EmbeddingCacheDir() string { return filepath.Join(CacheDir(), "embeddings") }

// RequireDefaultModel returns the default model dir, or an error telling the
// user how to install it (SetupHint) when it is not installed.
func RequireDefaultModel() (string, error) { return require(DefaultModel()) }

// RequireDefaultEmbedModel returns DefaultEmbedModel, or an error naming
// where it looked and how to install it (SetupHint) when it is not
// installed.
func RequireDefaultEmbedModel() (string, error) { return require(DefaultEmbedModel()) }

func require(d string) (string, error) {
	if _, err := os.Stat(filepath.Join(d, "model.onnx")); err != nil {
		return "", fmt.Errorf("default model not installed at %s (%s): %w", d, SetupHint, err)
	}
	return d, nil
}

// WasmCacheDir is where wazero keeps the native code it compiled from a
// WebAssembly module (PDFium's, for reading PDFs), so later processes skip
// the compilation.
func WasmCacheDir() string { return filepath.Join(CacheDir(), "wazero") }
