package encoder

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestVectorIsItsOwn: a text's vector is its own — the same alone, among
// all the others in one call, and in calls cut otherwise (two and three
// texts a batch, the texts reversed) — for MiniLM in float32 and in int8
// (the graphs this converter writes: graphForms), on ONNX Runtime and on
// the Go backend; within 1e-6, and in fact bit for bit (internal/inference
// batches texts of one length, and every int8 product quantizes its input
// per row). Before issue 64 an int8 vector moved with its batch by up to
// 0.012 (cosine 0.997 to itself alone).
func TestVectorIsItsOwn(t *testing.T) {
	forms := graphForms(t)
	texts := append([]string(nil), goldenTexts...)
	for i, s := range sciFactTexts(t, 24) {
		texts = append(texts, s)
		if w := strings.Fields(s); len(w) > 12 { // more lengths, some of them equal
			texts = append(texts, strings.Join(w[:4+i%9], " "))
		}
	}
	backends := []string{BackendGo}
	if DefaultBackend() == BackendORT {
		backends = append(backends, BackendORT)
	}
	ctx := context.Background()
	for _, form := range []string{formFused, formInt8} {
		for _, be := range backends {
			t.Run(form+"/"+be, func(t *testing.T) {
				texts := texts
				if be == BackendGo {
					texts = texts[:len(goldenTexts)+12] // the Go forward is slower; 12 abstracts and cuts
				}
				embed := func(o Options, in []string) [][]float32 {
					o.Backend = be
					enc, err := Load(ctx, forms[form], o)
					if err != nil {
						t.Fatal(err)
					}
					defer enc.Close()
					v, err := enc.EmbedDocuments(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					return v
				}
				all := embed(Options{}, texts)
				check := func(how string, got [][]float32, idx func(i int) int) {
					t.Helper()
					for i, v := range got {
						j := idx(i)
						if d := maxAbsDiff(v, all[j]); d > 1e-6 {
							t.Errorf("%s: text %d (%.30q) differs from itself among all by %.3g", how, j, texts[j], d)
						} else if !slices.Equal(v, all[j]) {
							t.Logf("%s: text %d within 1e-6 (%.2g) but not bit for bit", how, j, d)
						}
					}
				}
				enc, err := Load(ctx, forms[form], Options{Backend: be})
				if err != nil {
					t.Fatal(err)
				}
				defer enc.Close()
				for i, s := range texts {
					v, err := enc.EmbedDocuments(ctx, []string{s})
					if err != nil {
						t.Fatal(err)
					}
					check("alone", v, func(int) int { return i })
				}
				for _, size := range []int{2, 3} {
					check(fmt.Sprintf("%d a batch", size), embed(Options{BatchSize: size, Workers: 2}, texts), func(i int) int { return i })
				}
				rev := slices.Clone(texts)
				slices.Reverse(rev)
				check("reversed", embed(Options{}, rev), func(i int) int { return len(texts) - 1 - i })
			})
		}
	}
}
