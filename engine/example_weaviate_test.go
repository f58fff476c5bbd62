package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/anna-search/anna/engine"
)

// Point an engine directory's retrieval at a Weaviate cluster (started, for
// instance, by scripts/weaviate.sh start DIR): anna.db stays in the
// directory, the BM25 and dense lists come from the collection behind the
// alias, and anna embeds, fuses and explains as with its own indexes. The
// API key comes from the environment. Not run: it needs a cluster (`make
// test-cluster` runs the same against one).
func ExampleOpen_weaviate() {
	ctx := context.Background()
	eng, err := engine.Open(ctx, "my-index", engine.Options{Weaviate: &engine.Weaviate{
		URLs:        []string{"http://127.0.0.1:18000", "http://127.0.0.1:18001", "http://127.0.0.1:18002"},
		APIKey:      os.Getenv("ANNA_WEAVIATE_API_KEY"),
		Alias:       "MyIndex",
		Replication: 2,
	}})
	if errors.Is(err, engine.ErrUnauthorized) {
		log.Fatal("the cluster refused the API key: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	res, err := eng.Search(ctx, "nearest neighbour graphs", engine.SearchOptions{K: 10})
	if err != nil {
		log.Fatal(err) // errors.Is(err, engine.ErrBackend) when the cluster failed
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Explain)
	}
}
