package main

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/anna-search/anna/encoder"
)

func main() {
	ctx := context.Background()
	dir, backend := os.Args[1], os.Args[2]
	enc, err := encoder.Load(ctx, dir, encoder.Options{Backend: backend})
	if err != nil {
		panic(err)
	}
	target := "nearest neighbour graphs"
	others := []string{"bread", "a considerably longer text about the structure of hierarchical navigable small world graphs and how they are searched greedily from the top layer down", "graphs of nearest neighbours", "x y"}
	alone, err := enc.EmbedDocuments(ctx, []string{target})
	if err != nil {
		panic(err)
	}
	for i := range others {
		batch := append([]string{target}, others[:i+1]...)
		v, err := enc.EmbedDocuments(ctx, batch)
		if err != nil {
			panic(err)
		}
		d := 0.0
		for j := range v[0] {
			d = math.Max(d, math.Abs(float64(v[0][j]-alone[0][j])))
		}
		fmt.Printf("%s %s batch of %d: max abs diff %.3g\n", dir, backend, len(batch), d)
	}
}
