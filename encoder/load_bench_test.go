package encoder

import (
	"context"
	"testing"
)

// BenchmarkLoad times opening the default model and closing it, which is
// what a caller pays that only needs its fingerprint and dim (an engine
// whose vectors all come from the embedding cache), and the same with one
// short text embedded in between:
//
//	go test ./encoder -run '^$' -bench 'Load' -benchtime 10x -count 3
func BenchmarkLoad(b *testing.B) {
	dir := testModel(b)
	ctx := context.Background()
	for _, bm := range []struct {
		name string
		use  func(*Model) error
	}{
		{"Open", func(*Model) error { return nil }},
		{"OpenEmbedOne", func(e *Model) error {
			_, err := e.EmbedDocuments(ctx, []string{"one short text"})
			return err
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				enc, err := Load(ctx, dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := bm.use(enc); err != nil {
					b.Fatal(err)
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
