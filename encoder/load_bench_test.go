package encoder

import (
	"context"
	"testing"
)

// BenchmarkLoad times opening the default model, which is what a caller
// pays that only needs its fingerprint and dim (an engine whose vectors
// all come from the embedding cache), and BenchmarkLoadEmbedOne that plus
// embedding one short text:
//
//	go test ./encoder -run '^$' -bench 'Load' -benchtime 10x -count 3
func BenchmarkLoad(b *testing.B) {
	dir := testModel(b)
	ctx := context.Background()
	for b.Loop() {
		enc, err := Load(ctx, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadEmbedOne(b *testing.B) {
	dir := testModel(b)
	ctx := context.Background()
	for b.Loop() {
		enc, err := Load(ctx, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := enc.EmbedDocuments(ctx, []string{"one short text"}); err != nil {
			b.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
