package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/inference"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/tokenizer"
)

// TestPureGoBuilds builds annactl with CGO_ENABLED=0 for this machine and
// runs it, and compiles it with CGO_ENABLED=0 for darwin/arm64,
// windows/amd64 and linux/arm64 (go list -export: every package compiled,
// no link): every package annactl links must build without cgo (ONNX
// Runtime, the native tokenizer and the CUDA loader stay behind build
// constraints), and the host binary must say that it runs pure Go and,
// through annactl embed, reproduce the reference cosines and the native
// path's vectors within 1e-5 (checkPureEmbed). The
// go command's cache is shared: warm, the host build takes about 12 s
// (the link) and each cross-compile under a second; cold, a minute or two
// each on two busy cores.
func TestPureGoBuilds(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	hostBin := ""
	for _, target := range []struct{ goos, goarch string }{{"", ""}, {"darwin", "arm64"}, {"windows", "amd64"}, {"linux", "arm64"}} {
		name := "host"
		env := append(os.Environ(), "CGO_ENABLED=0")
		args := []string{"build", "-o", filepath.Join(t.TempDir(), "annactl"), "."}
		if target.goos != "" {
			name = target.goos + "/" + target.goarch
			env = append(env, "GOOS="+target.goos, "GOARCH="+target.goarch)
			args = []string{"list", "-export", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "."}
		}
		start := time.Now()
		cmd := exec.Command(gobin, args...)
		cmd.Env = env
		// stdout: go list's errors (the -f template); stderr may also say
		// "go: downloading …" where the module cache lacks a module that
		// only this target needs (cobra's mousetrap on Windows).
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil || len(strings.TrimSpace(string(b))) > 0 {
			t.Errorf("CGO_ENABLED=0 go %s for %s: %v\n%s%s", args[0], name, err, b, stderr.String())
			continue
		}
		t.Logf("CGO_ENABLED=0 go %s for %s: %.1f s", args[0], name, time.Since(start).Seconds())
		if name != "host" {
			continue
		}
		b, err = exec.Command(args[2], "--version").CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v\n%s", args[2], err, b)
		} else if want := "(inference: go, tokenizer: pure)"; !strings.Contains(string(b), want) {
			t.Errorf("%s --version printed %q, want it to contain %q", args[2], b, want)
		}
		hostBin = args[2]
	}
	if hostBin != "" && !t.Failed() {
		checkPureEmbed(t, hostBin)
	}
}

// TestRuntimeLine: the tokenizer named by --version and stats is the one
// tokenizer.Load gives in this build, the inference backend is the
// encoder's default, and int8's is named where it differs.
func TestRuntimeLine(t *testing.T) {
	path := filepath.Join(home.DefaultModel(), "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no installed default model: %v", err)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	if got := tok.Implementation(); got != tokenizerImpl {
		t.Errorf("tokenizer.Load gives the %s implementation, the runtime line says %s", got, tokenizerImpl)
	}
	if l, want := runtimeLine(), "inference: "+encoder.DefaultBackend()+","; !strings.Contains(l, want) {
		t.Errorf("runtime line %q does not contain %q", l, want)
	}
	if l, i8 := runtimeLine(), inference.Int8Backend(); (i8 != encoder.DefaultBackend()) != strings.Contains(l, "int8: "+i8+",") {
		t.Errorf("runtime line %q and int8's default backend %s disagree", l, i8)
	}
}

// checkPureEmbed runs the CGO_ENABLED=0 binary bin's embed on the
// published MiniLM reference sentences, tokenizer edge cases (accents,
// CJK, emoji, control characters, a text past the 256-token window) and
// the first 200 SciFact abstracts, and this (native) build's embed on the
// same file: every component must agree within 1e-5, and the pure
// binary's cosines must reproduce the reference's within its tolerance.
// Left out (logged) where this build has no ONNX Runtime or the default
// model or the shared data is missing. About 30–60 s on two busy cores.
func checkPureEmbed(t *testing.T, bin string) {
	t.Helper()
	if encoder.DefaultBackend() != encoder.BackendORT {
		t.Log("no native path in this build to compare the CGO_ENABLED=0 binary's vectors with")
		return
	}
	model, err := home.RequireDefaultModel()
	if err != nil {
		t.Logf("default model not installed, the embed comparison is skipped: %v", err)
		return
	}
	shared, err := shareddata.Dir()
	if err != nil {
		t.Logf("no shared data, the embed comparison is skipped: %v", err)
		return
	}
	refb, err := os.ReadFile(filepath.Join(shared, "reference", "all-MiniLM-L6-v2-cosines.json"))
	if err != nil {
		t.Logf("no reference cosines, the embed comparison is skipped: %v", err)
		return
	}
	var ref struct {
		Tolerance float64
		Pairs     []struct {
			A, B   string
			Cosine float64
		}
	}
	if err := json.Unmarshal(refb, &ref); err != nil {
		t.Fatalf("reference cosines: %v", err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	line := func(id, text string) {
		if err := enc.Encode(map[string]string{"id": id, "text": text}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range ref.Pairs {
		line(fmt.Sprintf("ref-%d-a", i), p.A)
		line(fmt.Sprintf("ref-%d-b", i), p.B)
	}
	for i, s := range []string{"Café naïve résumé — ÅNGSTRÖM", "東京タワーは高い。", "emoji 🙂🚀 and\ttabs\u0007bell",
		"x", strings.Repeat("antidisestablishmentarianism pneumonoultramicroscopic ", 200)} {
		line(fmt.Sprintf("tok-%d", i), s)
	}
	corpus, err := os.Open(filepath.Join(shared, "datasets", "scifact", "corpus.jsonl"))
	if err != nil {
		t.Logf("no SciFact corpus, the embed comparison is skipped: %v", err)
		return
	}
	sc := bufio.NewScanner(corpus)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	abstracts := 0
	for abstracts < 200 && sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		if _, err := f.Write(append(sc.Bytes(), '\n')); err != nil {
			t.Fatal(err)
		}
		abstracts++
	}
	corpus.Close()
	if err := f.Close(); err != nil || abstracts < 200 {
		t.Fatalf("writing %s: %v (%d abstracts)", in, err, abstracts)
	}
	pureOut, nativeOut := filepath.Join(dir, "pure.jsonl"), filepath.Join(dir, "native.jsonl")
	start := time.Now()
	cmd := exec.Command(bin, "embed", in, "--output", pureOut, "--model", model, "--cache=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 annactl embed: %v\n%s", err, b)
	}
	t.Logf("CGO_ENABLED=0 annactl embed: %d texts in %.1f s", 2*len(ref.Pairs)+5+abstracts, time.Since(start).Seconds())
	mustRun(t, "embed", in, "--output", nativeOut, "--model", model, "--cache=false")
	pure, native := readEmbeddings(t, pureOut), readEmbeddings(t, nativeOut)
	if len(pure) != len(native) || len(pure) != 2*len(ref.Pairs)+5+abstracts {
		t.Fatalf("%d pure vectors, %d native, want %d", len(pure), len(native), 2*len(ref.Pairs)+5+abstracts)
	}
	var worst float64
	for i := range pure {
		if string(pure[i].ID) != string(native[i].ID) || len(pure[i].Embedding) != len(native[i].Embedding) {
			t.Fatalf("line %d: pure %s (%d dims), native %s (%d dims)", i+1, pure[i].ID, len(pure[i].Embedding), native[i].ID, len(native[i].Embedding))
		}
		for j, x := range pure[i].Embedding {
			worst = max(worst, math.Abs(x-native[i].Embedding[j]))
		}
	}
	t.Logf("%d vectors, largest component difference %.2e", len(pure), worst)
	if worst > 1e-5 {
		t.Errorf("the CGO_ENABLED=0 binary's vectors differ from the native path's by up to %.2e (want ≤ 1e-5)", worst)
	}
	for i, p := range ref.Pairs {
		a, b := pure[2*i].Embedding, pure[2*i+1].Embedding
		var dot, na, nb float64
		for j := range a {
			dot, na, nb = dot+a[j]*b[j], na+a[j]*a[j], nb+b[j]*b[j]
		}
		if got := dot / math.Sqrt(na*nb); math.Abs(got-p.Cosine) > ref.Tolerance {
			t.Errorf("CGO_ENABLED=0 binary: cos(%q, %q) = %.4f, the reference says %.4f (tolerance %g)", p.A, p.B, got, p.Cosine, ref.Tolerance)
		}
	}
}

type embedLine struct {
	ID        json.RawMessage
	Embedding []float64
}

// readEmbeddings reads annactl embed's JSON lines.
func readEmbeddings(t *testing.T, path string) []embedLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []embedLine
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e embedLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, e)
	}
	return out
}
