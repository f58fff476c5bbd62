package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
)

// Open a directory with the default model (installed by `make setup`), add
// documents, and search them in hybrid mode.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)

	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	_, err = eng.Add(ctx, []engine.Document{
		{ID: "bread", Title: "Sourdough", Text: "Sourdough is leavened by wild yeast and lactic acid bacteria."},
		{ID: "hnsw", Title: "HNSW", Text: "A layered proximity graph for approximate nearest neighbour search over vectors."},
		{ID: "tides", Title: "Tides", Text: "Tides are caused mainly by the gravity of the Moon."},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := eng.Search(ctx, "how to find similar embeddings fast", engine.SearchOptions{K: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res[0].ID)
	// Output: hnsw
}

// Each hit explains itself: its rank and score in every list that was fused.
func ExampleEngine_Search_explain() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{
		{ID: "a", Text: "The cat sits outside"},
		{ID: "b", Text: "A man is playing guitar"},
	})
	res, _ := eng.Search(ctx, "cat", engine.SearchOptions{Mode: engine.ModeHybrid, K: 1})
	for _, c := range res[0].Explain {
		fmt.Printf("%s %s rank %d\n", res[0].ID, c.List, c.Rank)
	}
	// Output:
	// a lexical rank 1
	// a dense rank 1
}

// Hybrid sums each list's normalised scores (DefaultFusion, DBSF) unless
// told otherwise: FusionRRF fuses by ranks alone, FusionMinMax scales scores
// another way, and Weights gives a list more say — useful when the dense
// model is much stronger than BM25.
func ExampleSearchOptions_fusion() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{
		{ID: "bread", Text: "Sourdough is leavened by wild yeast and lactic acid bacteria."},
		{ID: "hnsw", Text: "A layered proximity graph for approximate nearest neighbour search over vectors."},
		{ID: "tides", Text: "Tides are caused mainly by the gravity of the Moon."},
	})
	res, err := eng.Search(ctx, "graph search for similar vectors", engine.SearchOptions{
		K:       1,
		Weights: map[string]float64{"dense": 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res[0].ID)
	// Output: hnsw
}

// An index can keep a fusion of its own, measured to suit its model (annactl
// eval --choose-fusion measures the three and records the best): searches
// that name no Fusion use it, until a reindex to another model.
func ExampleEngine_SetFusion() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{{ID: "tides", Text: "Tides are caused mainly by the gravity of the Moon."}})
	if err := eng.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax, Why: "measured on my queries"}); err != nil {
		log.Fatal(err)
	}
	st, _ := eng.Stats()
	fmt.Println(st.Fusion, st.FusionChoice.Why)
	// Output: minmax measured on my queries
}

// A read-only open writes nothing (several may run beside each other) and
// refuses writes with ErrReadOnly.
func ExampleOpen_readOnly() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	eng.Add(ctx, []engine.Document{{ID: "tides", Text: "Tides are caused mainly by the gravity of the Moon."}})
	eng.Close()

	ro, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer ro.Close()
	res, _ := ro.Search(ctx, "why does the sea rise", engine.SearchOptions{Mode: engine.ModeDense, K: 1})
	fmt.Println(res[0].ID)
	_, err = ro.Add(ctx, []engine.Document{{ID: "x", Text: "y"}})
	fmt.Println(errors.Is(err, engine.ErrReadOnly))
	// Output:
	// tides
	// true
}

// Check verifies a directory without changing it and reports every problem
// with the documents involved; Repair rebuilds what is derived.
func ExampleCheck() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	eng.Add(ctx, []engine.Document{{ID: "a", Text: "one"}, {ID: "b", Text: "two"}})
	eng.Close()

	os.RemoveAll(filepath.Join(dir, "lexical")) // lose the BM25 index
	rep, _ := engine.Check(ctx, dir)
	for _, p := range rep.Problems {
		fmt.Println(p)
	}
	fixed, _ := engine.Repair(ctx, dir, engine.RepairOptions{})
	fmt.Println(fixed.After.OK())
	// Output:
	// BM25: the index is missing (lexical/)
	// true
}

// Errors are typed: an empty query, an option out of range.
func ExampleEngine_Search_errors() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	_, err = eng.Search(ctx, " ", engine.SearchOptions{})
	fmt.Println(errors.Is(err, engine.ErrEmptyQuery))
	_, err = eng.Search(ctx, "cats", engine.SearchOptions{K: -1})
	var oe *engine.OptionError
	fmt.Println(errors.As(err, &oe), oe.Field)
	// Output:
	// true
	// true SearchOptions.K
}

// Reindex moves a directory to another model (here the default model served
// at 128 tokens, which has its own fingerprint): it re-encodes every
// document and switches model and graph at once; searches keep working
// meanwhile.
func ExampleEngine_Reindex() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{{ID: "a", Text: "The cat sits outside"}, {ID: "b", Text: "A man is playing guitar"}})

	short, err := encoder.Load(ctx, encoder.DefaultDir(), encoder.Options{MaxLength: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer short.Close()
	before := eng.Model().Fingerprint
	if err := eng.Reindex(ctx, engine.ReindexOptions{Encoder: short}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Model().Fingerprint != before, eng.Model().Fingerprint == short.Fingerprint())
	// Output: true true
}

// Delete removes documents by ID from the store and both indexes.
func ExampleEngine_Delete() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{{ID: "a", Text: "The cat sits outside"}, {ID: "b", Text: "A cat sleeps"}})
	n, _ := eng.Delete(ctx, []string{"a", "unknown"})
	res, _ := eng.Search(ctx, "cat", engine.SearchOptions{})
	fmt.Println(n, len(res), res[0].ID)
	// Output: 1 1 b
}

// A filter restricts a search to the documents whose metadata match it;
// snippets show the part of each hit that matched, with the query's terms
// marked.
func ExampleEngine_Search_filterAndSnippets() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anna-example-")
	defer os.RemoveAll(dir)
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.Add(ctx, []engine.Document{
		{ID: "en", Text: "The tides are caused mainly by the gravity of the Moon, and a little by the Sun.", Meta: map[string]string{"lang": "en", "kind": "physics"}},
		{ID: "fr", Text: "Les marées sont causées par la gravité de la Lune.", Meta: map[string]string{"lang": "fr", "kind": "physics"}},
		{ID: "bread", Text: "Sourdough rises slowly.", Meta: map[string]string{"lang": "en", "kind": "food"}},
	})
	where := engine.And(engine.Eq("kind", "physics"), engine.Not(engine.Eq("lang", "fr")))
	res, err := eng.Search(ctx, "gravity of the moon", engine.SearchOptions{K: 5, Filter: where, Snippets: true, SnippetSize: 40})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		s := r.Snippet
		fmt.Printf("%s %s: %q\n", r.ID, s.Source, s.Text)
		for _, h := range s.Highlights {
			fmt.Printf("  %q at %d\n", r.Text[h.Start:h.End], h.Start)
		}
	}
	// Output:
	// en lexical: "mainly by the gravity of the Moon, and a little"
	//   "gravity" at 35
	//   "Moon" at 50
}
