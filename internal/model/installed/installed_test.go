package installed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/model"
)

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeModel writes a tiny model directory (a manifest and one file) named
// name whose fingerprint follows graph, and returns its manifest.
func fakeModel(t *testing.T, dir, name, graph string) *model.Manifest {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), []byte(graph), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := fileSHA256(t, filepath.Join(dir, "model.onnx"))
	fp := model.NewFingerprinter()
	fp.Write([]byte(graph))
	m := &model.Manifest{Name: name, Architecture: "bert", Task: model.TaskEmbed, Dim: 8, MaxLength: 16, Pooling: "mean", Normalize: true,
		Fingerprint: fp.Sum("mean", true, 16), Files: map[string]string{"model.onnx": sum}}
	if err := model.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKeepAndFind: Keep copies a model in by content once (NAME-FP12),
// finds it again by fingerprint from any other copy, never overwrites
// another model that holds the name, and leaves an installed model where
// it is; Find skips what is not a model.
func TestKeepAndFind(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	models := filepath.Join(tmp, "models") // created by the first Keep
	src := filepath.Join(tmp, "ft", "model")
	m := fakeModel(t, src, "my model/1", "weights one")

	if dir, _, err := Find(models, m.Fingerprint); err != nil || dir != "" {
		t.Fatalf("Find in a missing models dir: %q %v", dir, err)
	}
	dir, got, copied, err := Keep(ctx, src, models)
	want := filepath.Join(models, "my-model-1-"+m.ShortFingerprint())
	if err != nil || !copied || dir != want || got.Fingerprint != m.Fingerprint {
		t.Fatalf("first Keep: %q copied=%v %v, want %q copied", dir, copied, err, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "model.onnx")); err != nil || string(b) != "weights one" {
		t.Fatalf("kept copy: %q %v", b, err)
	}
	// The same model elsewhere (the training folder moved): found, not copied.
	moved := filepath.Join(tmp, "ft_moved")
	if err := os.Rename(filepath.Join(tmp, "ft"), moved); err != nil {
		t.Fatal(err)
	}
	if d, _, copied, err := Keep(ctx, filepath.Join(moved, "model"), models); err != nil || copied || d != want {
		t.Fatalf("Keep of a kept model: %q copied=%v %v", d, copied, err)
	}
	os.MkdirAll(filepath.Join(models, "not-a-model"), 0o755)
	os.WriteFile(filepath.Join(models, "a-file"), []byte("x"), 0o644)
	if d, fm, err := Find(models, m.Fingerprint); err != nil || d != want || fm.Fingerprint != m.Fingerprint {
		t.Fatalf("Find: %q %v", d, err)
	}
	if d, _, err := Find(models, "0000"); err != nil || d != "" {
		t.Fatalf("Find of an unknown fingerprint: %q %v", d, err)
	}

	// Another model already holds the name NAME-FP12: it is left alone.
	other := filepath.Join(tmp, "other")
	m2 := fakeModel(t, other, "x", "weights two")
	taken := filepath.Join(models, KeepName(m2))
	fakeModel(t, taken, "squatter", "weights three")
	d, _, copied, err := Keep(ctx, other, models)
	if err != nil || !copied || d != filepath.Join(models, "x-"+m2.Fingerprint) {
		t.Fatalf("Keep with its name taken: %q copied=%v %v", d, copied, err)
	}
	if sq, err := model.LoadManifest(taken); err != nil || sq.Name != "squatter" {
		t.Fatalf("the model holding the name was replaced: %+v %v", sq, err)
	}

	// An installed model is kept where it is.
	inst := filepath.Join(models, "installed")
	m3 := fakeModel(t, inst, "installed", "weights four")
	if d, _, copied, err := Keep(ctx, inst, models); err != nil || copied || d != inst {
		t.Fatalf("Keep of an installed model: %q copied=%v %v", d, copied, err)
	}
	if d, _, err := Find(models, m3.Fingerprint); d != inst || err != nil {
		t.Fatalf("Find of the installed model: %q %v", d, err)
	}
}

// TestAdd installs a model directory under a name, refuses one whose files
// no longer match its manifest (leaving what was installed), and replaces
// an older install.
func TestAdd(t *testing.T) {
	ctx := context.Background()
	src, models := filepath.Join(t.TempDir(), "trained"), t.TempDir()
	write := func(graph string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(src, "context"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(src, "model.onnx"), []byte(graph), 0o644)
		os.WriteFile(filepath.Join(src, "context", "note.txt"), []byte("a subdirectory goes too"), 0o644)
		sum := fileSHA256(t, filepath.Join(src, "model.onnx"))
		fp := model.NewFingerprinter()
		fp.Write([]byte(graph))
		m := &model.Manifest{Name: "trained", Architecture: "bert", Task: model.TaskRerank, NumLabels: 1, Dim: 8, MaxLength: 16,
			Fingerprint: fp.Sum("", false, 16), Files: map[string]string{"model.onnx": sum}}
		if err := model.WriteManifest(src, m); err != nil {
			t.Fatal(err)
		}
	}
	write("graph one")
	m, err := Add(ctx, src, models, "rr")
	if err != nil {
		t.Fatal(err)
	}
	back, err := model.LoadManifest(filepath.Join(models, "rr"))
	if err != nil || back.Name != "rr" || m.Name != "rr" || back.Fingerprint != m.Fingerprint {
		t.Fatalf("installed manifest %+v, %v", back, err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "context", "note.txt")); string(b) != "a subdirectory goes too" {
		t.Errorf("subdirectory not copied: %q", b)
	}

	// A file changed after the manifest was written: refused, nothing replaced.
	os.WriteFile(filepath.Join(src, "model.onnx"), []byte("graph tampered"), 0o644)
	if _, err := Add(ctx, src, models, "rr"); err == nil || !strings.Contains(err.Error(), "model.onnx: sha256") {
		t.Fatalf("tampered source: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "model.onnx")); string(b) != "graph one" {
		t.Fatalf("a refused add changed the install: %q", b)
	}
	for _, bad := range []string{"", "a/b", "..", "."} {
		if _, err := Add(ctx, src, models, bad); err == nil || !strings.Contains(err.Error(), "one path element") {
			t.Errorf("name %q: %v", bad, err)
		}
	}

	write("graph two")
	if _, err := Add(ctx, src, models, "rr"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(models, "rr", "model.onnx")); string(b) != "graph two" {
		t.Fatalf("not replaced: %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(models, "rr.*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := Add(ctx, filepath.Join(models, "rr"), models, "rr"); err == nil || !strings.Contains(err.Error(), "already installed") {
		t.Errorf("adding an install onto itself: %v", err)
	}
}

// TestReplace: Replace installs a new conversion over a name and keeps the
// one it replaces aside (NAME-FP12), where Find finds it by fingerprint;
// the same conversion again, or one whose predecessor is installed
// elsewhere too, keeps nothing; a taken aside name is refused before
// anything moves.
func TestReplace(t *testing.T) {
	tmp := t.TempDir()
	models := filepath.Join(tmp, "models")
	old := fakeModel(t, filepath.Join(models, "m-int8"), "m-int8", "graph of before")
	next := filepath.Join(models, ".m-int8.import-1", "m-int8")
	nm := fakeModel(t, next, "m-int8", "graph of now")
	kept, err := Replace(next, models, "m-int8")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(models, "m-int8-"+old.ShortFingerprint()); kept != want {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if m, err := model.LoadManifest(filepath.Join(models, "m-int8")); err != nil || m.Fingerprint != nm.Fingerprint {
		t.Errorf("installed: %+v, %v (want the new conversion)", m, err)
	}
	if dir, m, err := Find(models, old.Fingerprint); err != nil || dir != kept || m.Name != "m-int8" {
		t.Errorf("Find(the old fingerprint) = %q, %+v, %v; want %s, its manifest as it was", dir, m, err, kept)
	}
	if _, err := os.Stat(next); !os.IsNotExist(err) {
		t.Errorf("the new conversion is still at %s: %v", next, err)
	}

	// The same conversion again: nothing to keep.
	again := filepath.Join(models, ".m-int8.import-2", "m-int8")
	fakeModel(t, again, "m-int8", "graph of now")
	if kept, err := Replace(again, models, "m-int8"); err != nil || kept != "" {
		t.Errorf("the same conversion again: kept %q, %v", kept, err)
	}
	// A conversion whose predecessor is also installed under another
	// name: that copy serves, nothing is kept.
	fakeModel(t, filepath.Join(models, "copy"), "copy", "graph of now")
	third := filepath.Join(models, ".m-int8.import-3", "m-int8")
	fakeModel(t, third, "m-int8", "graph of later")
	if kept, err := Replace(third, models, "m-int8"); err != nil || kept != "" {
		t.Errorf("predecessor installed elsewhere: kept %q, %v", kept, err)
	}
	// The aside names taken by other things: refused, nothing moved.
	cur, _ := model.LoadManifest(filepath.Join(models, "m-int8"))
	for _, n := range []string{"m-int8-" + cur.ShortFingerprint(), "m-int8-" + cur.Fingerprint} {
		if err := os.WriteFile(filepath.Join(models, n), []byte("not a model"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(filepath.Join(models, "copy"))
	fourth := filepath.Join(models, ".m-int8.import-4", "m-int8")
	fakeModel(t, fourth, "m-int8", "graph of the future")
	if _, err := Replace(fourth, models, "m-int8"); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("aside names taken: %v", err)
	}
	if m, err := model.LoadManifest(filepath.Join(models, "m-int8")); err != nil || m.Fingerprint != cur.Fingerprint {
		t.Errorf("after a refused Replace: %+v, %v", m, err)
	}
}

// TestResolve: a path is itself, a name the installed model's directory,
// an alias of the catalogue (any letter case) the model it names; a name
// found nowhere is an error with a hint to install it, naming the
// catalogue's model when the name is an alias.
func TestResolve(t *testing.T) {
	models := t.TempDir()
	fakeModel(t, filepath.Join(models, "multilingual-e5-small"), "multilingual-e5-small", "g")
	for s, want := range map[string]string{
		"":                      "",
		"multilingual-e5-small": filepath.Join(models, "multilingual-e5-small"),
		"multilingual":          filepath.Join(models, "multilingual-e5-small"),
		"Multilingual":          filepath.Join(models, "multilingual-e5-small"),
		models + "/x":           models + "/x",
	} {
		if got, err := Resolve(models, s); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	empty := t.TempDir()
	for s, want := range map[string]string{"multilingual": "multilingual-e5-small", "no-such-model": ""} {
		_, err := Resolve(empty, s)
		hs := hint.Of(err)
		if err == nil || len(hs) != 1 || hs[0] != (hint.Action{Kind: hint.InstallModel, Model: want}) || strings.Contains(err.Error(), "annactl") {
			t.Errorf("Resolve(%q) of nothing installed: %v, hint %+v", s, err, hs)
		}
	}
	if got := Aliases("multilingual-e5-small"); len(got) != 1 || got[0] != "multilingual" {
		t.Errorf("Aliases = %v", got)
	}
}
