package lexical

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/storage"
)

// TestBlockMaximaInBackground: a search that finds no block maxima asks
// for them and is answered without; the index's goroutine computes them,
// the next search uses them and returns the same hits; Close stops the
// goroutine. (TestScoresMatchBruteForce checks the maxima's exactness.)
func TestBlockMaximaInBackground(t *testing.T) {
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// one segment in which "cat" has more postings than blockMinDF,
	// spread over three blocks, its strongest document in one of them
	var docs []storage.Doc
	for i := range 3 * blockSize {
		d := storage.Doc{ID: fmt.Sprintf("d%05d", i), Text: "dog bird"}
		if i%3 == 0 {
			d.Text = "cat dog bird fish eel"
		}
		if i == 2*blockSize+3 {
			d.Text = "cat cat cat"
		}
		docs = append(docs, d)
	}
	ctx := context.Background()
	if err := ix.Index(ctx, docs, 1); err != nil {
		t.Fatal(err)
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.segs) != 1 {
		t.Fatalf("%d segments, want 1", len(snap.segs))
	}
	key := blockKey{snap.segs[0].Id(), 1, "cat"} // fields[1] is text
	reader.Close()
	if fields[key.field] != "text" {
		t.Fatalf("fields = %v", fields)
	}

	before, err := ix.Search(ctx, "cat dog", 5)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var bb *blockBounds
	for {
		var ok bool
		if bb, ok = ix.blocks.lookup(key); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("block maxima not computed within 30 s of the search that asked for them")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(bb.start) - 1; got != 3 {
		t.Fatalf("%d blocks, want 3", got)
	}
	// Each block's frontier: (tf 1, length 5), the pair of every other
	// document with "cat", except in the block holding "cat cat cat", where
	// (3, 3) dominates it (Bleve numbers a batch's documents in an order of
	// its own).
	var strong int
	for b := range 3 {
		f := bb.pts[bb.start[b]:bb.start[b+1]]
		switch {
		case slices.Equal(f, []blockPoint{{1, 5}}):
		case slices.Equal(f, []blockPoint{{3, 3}}):
			strong++
		default:
			t.Fatalf("block %d's frontier %v", b, f)
		}
	}
	if strong != 1 {
		t.Fatalf("%d blocks hold (3, 3), want 1", strong)
	}
	after, err := ix.Search(ctx, "cat dog", 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Fatalf("hits with block maxima %v, without %v", after, before)
	}
	if after[0].ID != fmt.Sprintf("d%05d", 2*blockSize+3) {
		t.Fatalf("best hit %v", after[0])
	}
	done := ix.blocks.done
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Close left the block maxima goroutine running")
	}
}
