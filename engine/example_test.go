package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"

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
