package ingest_test

import (
	"context"
	"fmt"
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

func write(t *testing.T, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// longMD is a Markdown file of several sections (several documents).
func longMD(words ...string) string {
	var b strings.Builder
	b.WriteString("# Station notes\n\n")
	for i, w := range words {
		b.WriteString("## Section " + w + "\n\n")
		for range 40 {
			b.WriteString("The " + w + " keeper writes the log of watch " + string(rune('a'+i)) + " every evening. ")
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// TestDirSync: a folder's files become documents by part with their
// metadata; a second run reads nothing; an edit re-embeds only the part
// that changed; a rename keeps its vectors; a file that fails to read
// keeps its documents; Remove takes the documents of files gone.
func TestDirSync(t *testing.T) {
	ctx := context.Background()
	root, dir := t.TempDir(), t.TempDir()
	enc := &encodertest.Counting{Hashing: &encodertest.Hashing{D: 32, FP: "fp"}}
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	write(t, root, "notes/long.md", longMD("alpha", "bravo", "charlie"))
	write(t, root, "short.txt", "Short note\n\nOne line of text about wicks.\n")
	write(t, root, "image.png", "\x89PNG\r\n\x1a\n\x00\x00")
	run := func(remove bool) ingest.FolderStats {
		t.Helper()
		var skipped []string
		fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{Remove: remove, OnSkip: func(f files.File) { skipped = append(skipped, f.Rel+":"+f.Skip) }})
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	fs := run(false)
	// long.md: its title's line joins the first section (too small alone),
	// then a document per section.
	if fs.FilesRead != 2 || fs.Added != 4 || len(fs.Skipped) != 1 || fs.Skipped[0].Skip != "binary" {
		t.Fatalf("first run: %+v", fs)
	}
	docs, _ := eng.Get(ctx, "notes/long.md#2", "short.txt")
	if len(docs) != 2 {
		t.Fatalf("IDs: %v", docs)
	}
	sec, short := docs[0], docs[1]
	if sec.Meta["path"] != "notes/long.md" || sec.Meta["section"] != "Station notes › Section bravo" || sec.Meta["lines"] == "" ||
		sec.Meta["format"] != "markdown" || sec.Meta["ext"] != "md" || sec.Meta["sha256"] == "" || sec.Meta["mtime"] == "" || sec.Title != "Station notes" {
		t.Errorf("section document: %+v", sec)
	}
	if n, _ := sec.MetaValues["parts"].Number(); n != 3 {
		t.Errorf("parts %v", sec.MetaValues["parts"])
	}
	if short.Title != "Short note" {
		t.Errorf("a .txt's title is its first line: %q", short.Title)
	}

	// Nothing changed: nothing read.
	if fs := run(false); fs.FilesRead != 0 || fs.FilesUnchanged != 2 || fs.Unchanged != 4 || fs.Added+fs.Updated != 0 {
		t.Fatalf("second run: %+v", fs)
	}

	// One section edited: the file's three documents updated (their
	// metadata), one re-embedded (its passages), two keeping their vectors.
	before := enc.Embedded()
	write(t, root, "notes/long.md", strings.Replace(longMD("alpha", "bravo", "charlie"), "The bravo keeper writes", "The bravo keeper signs", 1))
	fs = run(false)
	if fs.FilesRead != 1 || fs.Updated != 3 || fs.Reused != 2 || enc.Embedded()-before > 3 {
		t.Fatalf("edit: %+v, %d texts embedded", fs, enc.Embedded()-before)
	}

	// Renamed: moved, nothing embedded.
	before = enc.Embedded()
	if err := os.Rename(filepath.Join(root, "notes/long.md"), filepath.Join(root, "notes/renamed.md")); err != nil {
		t.Fatal(err)
	}
	fs = run(true)
	if fs.FilesMoved != 1 || fs.Deleted != 3 || fs.Reused != 3 || enc.Embedded() != before {
		t.Fatalf("rename: %+v, %d texts embedded", fs, enc.Embedded()-before)
	}

	// A file that fails to read keeps its documents; the summary names it.
	write(t, root, "short.txt", "bin\x00ary now")
	fs = run(true)
	if fs.FilesFailed != 1 || fs.Skipped[len(fs.Skipped)-1].Err == nil {
		t.Fatalf("failed file: %+v", fs)
	}
	if got, _ := eng.Get(ctx, "short.txt"); len(got) != 1 {
		t.Fatal("the failed file's document was lost")
	}

	// Gone: removed with Remove.
	os.Remove(filepath.Join(root, "short.txt"))
	fs = run(true)
	if fs.FilesRemoved != 1 || fs.Deleted != 1 {
		t.Fatalf("removal: %+v", fs)
	}
	if st, _ := eng.Stats(); st.Documents != 3 {
		t.Fatalf("%d documents left, want the 3 of renamed.md", st.Documents)
	}
}

// TestWatchLibrary: the library call keeps an engine in step with a folder
// until its context ends.
func TestWatchLibrary(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root, dir := t.TempDir(), t.TempDir()
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "fp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	write(t, root, "a.md", "# A\n\nfirst words\n")
	_, done := watching(ctx, eng, root)
	write(t, root, "sub/b.md", "# B\n\nsecond words about tides\n")
	deadline := time.After(20 * time.Second)
	for {
		rs, _ := eng.Search(ctx, "tides", engine.SearchOptions{Mode: engine.ModeLexical, K: 1})
		if len(rs) == 1 && rs[0].ID == "sub/b.md" {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the new file never reached search")
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Watch returned %v, want context.Canceled", err)
	}
}

// watching starts Watch over root into eng (debounced 50 ms) and returns
// once it is ready: the stats of the syncs after its first, and what Watch
// returns.
func watching(ctx context.Context, eng *engine.Engine, root string) (<-chan ingest.FolderStats, <-chan error) {
	ready := make(chan struct{})
	synced := make(chan ingest.FolderStats, 16)
	done := make(chan error, 1)
	go func() {
		done <- ingest.Watch(ctx, eng, root, ingest.WatchOptions{Debounce: 50 * time.Millisecond, Ready: func() { close(ready) },
			OnSync: func(fs ingest.FolderStats, err error) { synced <- fs }})
	}()
	<-ready
	for len(synced) > 0 { // the first syncs, done before Ready
		<-synced
	}
	return synced, done
}

// blockingApply is an engine whose commits wait, up to a few seconds,
// until wait says go on; timedOut counts those that waited in vain.
type blockingApply struct {
	*engine.Engine
	wait     func() bool
	timedOut *int
}

func (b blockingApply) Apply(ctx context.Context, docs []engine.Document, dels []string) (engine.AddResult, error) {
	deadline := time.Now().Add(5 * time.Second)
	for !b.wait() {
		if time.Now().After(deadline) {
			*b.timedOut++
			break
		}
		time.Sleep(time.Millisecond)
	}
	return b.Engine.Apply(ctx, docs, dels)
}

func (b blockingApply) Add(ctx context.Context, docs []engine.Document) (engine.AddResult, error) {
	return b.Apply(ctx, docs, nil)
}

// TestFolderReadsAhead: while a file's documents are being committed, the
// files after it are read (parsing overlaps the model's run), and what is
// committed still comes in the listing's order.
func TestFolderReadsAhead(t *testing.T) {
	if ingest.ReadAhead() < 2 {
		t.Skip("one core: no reading ahead")
	}
	ctx := context.Background()
	root := t.TempDir()
	for i := range 6 {
		write(t, root, fmt.Sprintf("n%d.md", i), fmt.Sprintf("# Note %d\n\nword%d\n", i, i))
	}
	eng, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: &encodertest.Hashing{D: 16, FP: "fp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var mu sync.Mutex
	read := map[string]bool{}
	defer ingest.CountReads(func(rel string) { mu.Lock(); read[rel] = true; mu.Unlock() })()
	var order []int
	// The first commit (n0.md's) waits until n2.md has been read.
	first, timedOut := true, 0
	be := blockingApply{Engine: eng, timedOut: &timedOut, wait: func() bool {
		if !first {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		return read["n2.md"]
	}}
	fs, err := ingest.Dir(ctx, be, root, ingest.FolderOptions{Options: ingest.Options{Batch: 1, Progress: func(p ingest.Progress) {
		if p.Documents > 0 {
			first = false
			order = append(order, p.Read)
		}
	}}})
	if err != nil || fs.Added != 6 {
		t.Fatalf("err %v, %+v", err, fs)
	}
	if !slices.Equal(order, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("commits in the order %v", order)
	}
	if timedOut > 0 {
		t.Error("n2.md was not read while n0.md's documents were being committed")
	}
}
