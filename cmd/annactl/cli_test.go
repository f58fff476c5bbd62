package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// TestMain lets the test binary stand in for annactl in child processes
// (crash and interrupt tests): with ANNACTL_AS_MAIN=1 it runs the command
// line it was given, with the same signal handling as main.
func TestMain(m *testing.M) {
	if os.Getenv("ANNACTL_AS_MAIN") == "1" {
		ctx, stop := interruptContext()
		code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// child returns an annactl child process running args.
func child(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ANNACTL_AS_MAIN=1")
	return cmd
}

// result is what one in-process annactl run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// annactl runs the command line in-process with stdin.
func annactl(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// mustRun runs the command line and fails the test unless it exits 0.
func mustRun(t testing.TB, args ...string) result {
	t.Helper()
	r := annactl(t, "", args...)
	if r.code != 0 {
		t.Fatalf("annactl %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// writeCorpus writes n BEIR corpus lines of about words words each, from a
// small vocabulary so that queries find them, and returns the path.
func writeCorpus(t testing.TB, dir string, n, words int, seed int64) string {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	vocab := strings.Fields("graph search vector index neighbour query document model tensor layer token score rank fusion lexical dense hybrid recall precision cluster")
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := make([]string, words)
		for j := range w {
			w[j] = fmt.Sprintf("%s%d", vocab[rng.Intn(len(vocab))], rng.Intn(100))
		}
		line, _ := json.Marshal(map[string]string{"_id": fmt.Sprintf("d%03d", i), "title": fmt.Sprintf("document %d", i), "text": strings.Join(w, " ")})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, fmt.Sprintf("corpus-%d-%d.jsonl", n, seed))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// statsOf returns `annactl stats --json` of dir.
func statsOf(t testing.TB, dir string) (jsonStats, result) {
	t.Helper()
	r := annactl(t, "", "stats", "--index", dir, "--json")
	var st jsonStats
	if r.stdout != "" {
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("stats output %q: %v", r.stdout, err)
		}
	}
	return st, r
}

// snapshotFiles hashes every file under dir, with its modification time.
func snapshotFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%x %s", sha256.Sum256(b), fi.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ownHome gives the test an ANNA_HOME of its own holding only the default
// model (linked), and returns it: what the installed models would change —
// a reranker measured to help becomes mining's default teacher — stays out.
// ONNX Runtime is still the installed one.
func ownHome(t *testing.T) string {
	t.Helper()
	def := needModel(t)
	h := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(h, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(def, filepath.Join(h, "models", home.DefaultModelName)); err != nil {
		t.Fatal(err)
	}
	// and its int8 form, which index builds with by default (make setup
	// installs it), and the sources it is converted from
	for _, p := range []string{filepath.Join("models", home.DefaultModelName+"-int8"), "src"} {
		if _, err := os.Stat(filepath.Join(home.Dir(), p)); err == nil {
			if err := os.Symlink(filepath.Join(home.Dir(), p), filepath.Join(h, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("ANNA_ORT_LIB", home.ORTLibrary())
	t.Setenv("ANNA_HOME", h)
	return h
}

func needModel(t testing.TB) string {
	t.Helper()
	dir, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	return dir
}
