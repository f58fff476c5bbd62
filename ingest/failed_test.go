package ingest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/files"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/encodertest"
)

// TestDirRemembersFailures: a scanned and an encrypted PDF fail to read;
// the next sync (the engine reopened) does not read them again but names
// them with their reasons; a touched file, a change of the readers'
// limits and a file that was gone are read again; a file that reads
// after failing leaves the record.
func TestDirRemembersFailures(t *testing.T) {
	ctx := context.Background()
	root, dir := t.TempDir(), t.TempDir()
	enc := &encodertest.Hashing{D: 32, FP: "fp"}
	copyFile(t, filepath.Join("..", "format", "files", "testdata", "scanned.pdf"), filepath.Join(root, "scanned.pdf"))
	copyFile(t, filepath.Join("..", "format", "files", "testdata", "encrypted.pdf"), filepath.Join(root, "encrypted.pdf"))
	write(t, root, "note.md", "# Wicks\n\nTrim the wicks before the evening watch.\n")
	var reads []string
	defer ingest.CountReads(func(rel string) { reads = append(reads, rel) })()
	run := func(lim files.Limits) (ingest.FolderStats, map[string]files.File) {
		t.Helper()
		eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		reads = nil
		heard := map[string]files.File{}
		fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{Files: files.Options{Limits: lim}, OnSkip: func(f files.File) { heard[f.Rel] = f }})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(reads)
		return fs, heard
	}
	fs, _ := run(files.Limits{})
	if fs.FilesRead != 1 || fs.FilesFailed != 2 || fs.FilesStillFailing != 0 || !slices.Equal(reads, []string{"encrypted.pdf", "note.md", "scanned.pdf"}) {
		t.Fatalf("first sync: %+v, read %v", fs, reads)
	}

	fs, heard := run(files.Limits{})
	if len(reads) != 0 || fs.FilesFailed != 0 || fs.FilesStillFailing != 2 || fs.FilesUnchanged != 1 || len(fs.Skipped) != 2 {
		t.Fatalf("second sync: %+v, read %v", fs, reads)
	}
	for rel, want := range map[string]error{"scanned.pdf": files.ErrNoTextLayer, "encrypted.pdf": files.ErrEncrypted} {
		f := heard[rel]
		if f.Skip != files.Reason(want) || !errors.Is(f.Err, want) || !errors.Is(f.Err, ingest.ErrNotReadAgain) {
			t.Errorf("%s heard as %q, %v", rel, f.Skip, f.Err)
		}
	}
	if got := files.Summary(fs.FilesRead+fs.FilesUnchanged, fs.Skipped); got != "1 read, 2 skipped: 1 .pdf (encrypted), 1 .pdf (no text layer)" {
		t.Errorf("summary %q", got)
	}

	// Touched: read again (and still failing).
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(root, "scanned.pdf"), later, later); err != nil {
		t.Fatal(err)
	}
	fs, _ = run(files.Limits{})
	if !slices.Equal(reads, []string{"scanned.pdf"}) || fs.FilesFailed != 1 || fs.FilesStillFailing != 1 {
		t.Fatalf("after a touch: %+v, read %v", fs, reads)
	}

	// Other readers (limits): every failure read again.
	fs, _ = run(files.Limits{MaxText: 1 << 20})
	if !slices.Equal(reads, []string{"encrypted.pdf", "scanned.pdf"}) || fs.FilesFailed != 2 {
		t.Fatalf("other limits: %+v, read %v", fs, reads)
	}

	if fs, _ = run(files.Limits{}); len(reads) != 2 || fs.FilesFailed != 2 {
		t.Fatalf("the limits back: %+v, read %v", fs, reads)
	}

	// Gone, then back as it was (same size and time): read again.
	p := filepath.Join(root, "encrypted.pdf")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	os.Remove(p)
	if fs, _ = run(files.Limits{}); len(reads) != 0 || fs.FilesStillFailing != 1 {
		t.Fatalf("one gone: %+v, read %v", fs, reads)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	if fs, _ = run(files.Limits{}); !slices.Equal(reads, []string{"encrypted.pdf"}) || fs.FilesFailed != 1 {
		t.Fatalf("back: %+v, read %v", fs, reads)
	}

	// Mended: read, indexed, no longer in the record; the last one gone,
	// no record.
	record := func() string {
		eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		raw, err := eng.State("ingest.failed")
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	copyFile(t, filepath.Join("..", "format", "files", "testdata", "report-ghostscript.pdf"), filepath.Join(root, "scanned.pdf"))
	if fs, _ = run(files.Limits{}); fs.FilesRead != 1 || fs.FilesStillFailing != 1 || fs.FilesFailed != 0 {
		t.Fatalf("mended: %+v, read %v", fs, reads)
	}
	if r := record(); !strings.Contains(r, `"encrypted.pdf"`) || strings.Contains(r, "scanned.pdf") {
		t.Errorf("record after the mend: %s", r)
	}
	os.Remove(p)
	if fs, _ = run(files.Limits{}); fs.FilesStillFailing != 0 || len(reads) != 0 {
		t.Fatalf("none failing: %+v, read %v", fs, reads)
	}
	if r := record(); r != "" {
		t.Errorf("record with no file failing: %s", r)
	}
}

// failingEncoder embeds with Hashing until ok calls are spent, then fails.
type failingEncoder struct {
	*encodertest.Hashing
	ok int
}

var errModel = errors.New("model broke")

func (f *failingEncoder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	if f.ok <= 0 {
		return nil, errModel
	}
	f.ok--
	return f.Hashing.EmbedDocuments(ctx, texts)
}

// TestDirEmbedFailure: the model failing mid-sync is Dir's error; the
// files committed before stay, the others are neither stored nor taken
// for files that failed to read, and the next sync reads exactly them.
func TestDirEmbedFailure(t *testing.T) {
	ctx := context.Background()
	root, dir := t.TempDir(), t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, root, n+".md", "# "+n+"\n\nThe "+n+" keeper trims the wicks.\n")
	}
	enc := &failingEncoder{Hashing: &encodertest.Hashing{D: 16, FP: "fp"}, ok: 1}
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{Options: ingest.Options{Batch: 1}})
	if !errors.Is(err, errModel) || fs.Added != 1 || fs.FilesFailed != 0 || fs.FilesStillFailing != 0 {
		t.Fatalf("model failing: err %v, %+v", err, fs)
	}
	enc.ok = 100
	var reads []string
	defer ingest.CountReads(func(rel string) { reads = append(reads, rel) })()
	fs, err = ingest.Dir(ctx, eng, root, ingest.FolderOptions{Options: ingest.Options{Batch: 1}})
	slices.Sort(reads)
	if err != nil || fs.FilesUnchanged != 1 || fs.Added != 2 || !slices.Equal(reads, []string{"b.md", "c.md"}) {
		t.Fatalf("model mended: err %v, %+v, read %v", err, fs, reads)
	}
}

// TestWatchRemembersFailures: a watch reads a scanned PDF once, not at
// every sync after, and again when it is written, even with its time put
// back (its event forces it).
func TestWatchRemembersFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root, dir := t.TempDir(), t.TempDir()
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: &encodertest.Hashing{D: 16, FP: "fp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	scanned := filepath.Join(root, "scanned.pdf")
	copyFile(t, filepath.Join("..", "format", "files", "testdata", "scanned.pdf"), scanned)
	write(t, root, "a.md", "# A\n\nfirst words\n")
	var mu sync.Mutex
	reads := 0
	defer ingest.CountReads(func(rel string) {
		if rel == "scanned.pdf" {
			mu.Lock()
			reads++
			mu.Unlock()
		}
	})()
	readsNow := func() int { mu.Lock(); defer mu.Unlock(); return reads }
	synced, done := watching(ctx, eng, root)
	waitSync := func(what string, ok func(ingest.FolderStats) bool) ingest.FolderStats {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case fs := <-synced:
				if ok(fs) {
					return fs
				}
			case <-deadline:
				t.Fatalf("no sync %s", what)
			}
		}
	}
	write(t, root, "b.md", "# B\n\nsecond words\n")
	fs := waitSync("reading b.md", func(fs ingest.FolderStats) bool { return fs.FilesRead == 1 })
	if n := readsNow(); n != 1 || fs.FilesStillFailing != 1 || fs.FilesFailed != 0 {
		t.Fatalf("after a sync for b.md: scanned.pdf read %d times, %+v", n, fs)
	}
	// Written with its time put back: the stamps say unchanged, the
	// event says read.
	fi, _ := os.Stat(scanned)
	data, _ := os.ReadFile(scanned)
	if err := os.WriteFile(scanned, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(scanned, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	waitSync("reading scanned.pdf", func(fs ingest.FolderStats) bool { return fs.FilesFailed == 1 })
	if n := readsNow(); n != 2 {
		t.Fatalf("scanned.pdf written: read %d times in all, want 2", n)
	}
	cancel()
	<-done
}
