package decoder

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/anna-search/anna/internal/testmodels"
)

// A trainable head run over the rows a device trainer returns
// (HeadForward, HeadBackward) is the head Pool and PoolBackward run over a
// Forward of the model: the same embeddings, the same head gradients, and
// ∂loss/∂rows equal to the gradients PoolBackward leaves for the final
// hidden state and (multilayer) each inner layer's output at the last
// token — bit for bit, as the same code runs on the same values.
func TestHeadOverRowsSameAsPool(t *testing.T) {
	for _, mode := range []string{PoolLatent, PoolMultiLayer} {
		cfg := testmodels.Decoder("llama")
		cfg.NumHiddenLayers = 3
		models := make([]*Model, 2)
		for i := range models {
			m, err := New(cfg, RandomTensors(cfg, 0.1, 4))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.EnableHead(HeadConfig{Mode: mode, Latents: 3, Heads: 4}, 5); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(6, 6))
			for _, p := range m.HeadParams() { // zero layer weights and biases at init
				for j := range p.W {
					p.W[j] = float32(0.1 * r.NormFloat64())
				}
			}
			models[i] = m
		}
		ref, host := models[0], models[1]
		r := rand.New(rand.NewPCG(7, 7))
		b := randomBatch(r, 5, 8, cfg.VocabSize)
		a, err := ref.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		lens, _ := b.lengths(cfg)
		N, T, C, L := b.N, b.T, cfg.HiddenSize, cfg.NumHiddenLayers
		// the rows a device returns (cuda.Decoder.Pool in the head's mode)
		var rows []float32
		eosRow := func(src []float32, n int) []float32 {
			e := n*T + lens[n] - 1
			return src[e*C : e*C+C]
		}
		if mode == PoolLatent {
			rows = append(rows, a.Hidden...)
		} else {
			for l := 0; l < L; l++ {
				src := a.Hidden
				if l < L-1 {
					src = a.xs[l+1]
				}
				for n := 0; n < N; n++ {
					rows = append(rows, eosRow(src, n)...)
				}
			}
		}
		want, err := ref.Pool(a, mode)
		if err != nil {
			t.Fatal(err)
		}
		ha, got, err := host.HeadForward(mode, rows, b)
		if err != nil {
			t.Fatal(err)
		}
		same(t, mode+" embeddings", got, want)

		dp := make([]float32, N*C)
		for i := range dp {
			dp[i] = float32(r.NormFloat64())
		}
		dh := make([]float32, N*T*C)
		ref.PoolBackward(a, mode, dp, dh)
		dr := host.HeadBackward(ha, dp)
		var wantRows []float32
		if mode == PoolLatent {
			wantRows = dh
		} else {
			for l := 0; l < L; l++ {
				for n := 0; n < N; n++ {
					if l < L-1 {
						wantRows = append(wantRows, a.dEOS[l][n*C:n*C+C]...)
					} else {
						wantRows = append(wantRows, eosRow(dh, n)...)
					}
				}
			}
		}
		same(t, mode+" ∂loss/∂rows", dr, wantRows)
		for i, p := range ref.HeadParams() {
			same(t, mode+" gradient of "+p.Name, host.HeadParams()[i].G, p.G)
		}
		if _, _, err := host.HeadForward(mode, rows[1:], b); err == nil {
			t.Errorf("%s: rows of the wrong size accepted", mode)
		}
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}
