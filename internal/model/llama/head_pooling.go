package llama

import (
	"math"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/tensor"
	"github.com/anna-search/anna/model"
)

// poolingHead is a trainable pooling head (train/decoder's, "pooling.…"):
// r latent queries attend, per head, over the last hidden states (latent)
// or over every layer's state at the last token plus the trainable layer
// weights (multi-layer); Z = (P·V)·Woᵀ, Y = Z + fc2(GELU(fc1(Z))), and the
// mean of Y's rows, N×H.
type poolingHead struct {
	plainInputs
	multi             bool
	H, r, h, L        int
	latents, layerW   []float32
	k, v, o, fc1, fc2 *tensor.Weight
	b1, b2            []float32
}

func newPoolingHead(cfg *model.Config, get func(string, int) []float32) *poolingHead {
	hc, H := cfg.PoolingHead, cfg.HiddenSize
	h := &poolingHead{multi: hc.Mode == model.PoolingMultiLayer, H: H, r: hc.Latents, h: hc.Heads, L: cfg.NumHiddenLayers,
		latents: get("pooling.latents", hc.Latents*H)}
	if h.multi {
		h.layerW = get("pooling.layer_weights", cfg.NumHiddenLayers*H)
	}
	lin := func(name string) *tensor.Weight {
		return tensor.PackWeight(get("pooling."+name+".weight", H*H), H, H, false)
	}
	h.k, h.v, h.o, h.fc1, h.fc2 = lin("k_proj"), lin("v_proj"), lin("o_proj"), lin("mlp.fc1"), lin("mlp.fc2")
	h.b1, h.b2 = get("pooling.mlp.fc1.bias", H), get("pooling.mlp.fc2.bias", H)
	return h
}

func (*poolingHead) output() string { return model.OutputEmbedding }
func (h *poolingHead) dim() int     { return h.H }
func (h *poolingHead) taps() bool   { return h.multi }

func (h *poolingHead) apply(p *embPass, th int) []float32 {
	if !h.multi {
		return h.latentPool(p.xn, p.lens, p.offs, p.keyBias, th)
	}
	N, H, L := p.b.N, h.H, p.L
	for n := range p.lens {
		r := p.lastRow(n)
		copy(p.layerRows[((L-1)*N+n)*H:((L-1)*N+n+1)*H], p.xn[r*H:r*H+H])
	}
	return h.layerPool(p.layerRows, N, th)
}

// latentPool is the latent pooling head over each sequence's last hidden
// states xn (real rows back to back; keyBias hides holes in the mask).
func (h *poolingHead) latentPool(xn []float32, lens, offs []int, keyBias []float32, th int) []float32 {
	H, R := h.H, offs[len(lens)]
	kp, vp := make([]float32, R*H), make([]float32, R*H)
	h.k.MatMul(kp, H, xn[:R*H], H, R, nil, th)
	h.v.MatMul(vp, H, xn[:R*H], H, R, nil, th)
	return h.rest(kp, vp, lens, offs, keyBias, th)
}

// layerPool is the multi-layer pooling head over rows (L×N×H: layer l's
// state at sequence n's last token), plus the trainable layer weights.
func (h *poolingHead) layerPool(rows []float32, N, th int) []float32 {
	H, L := h.H, h.L
	xs := make([]float32, N*L*H) // sequence-major: N×L×H
	for n := 0; n < N; n++ {
		for l := 0; l < L; l++ {
			dst, src, lw := xs[(n*L+l)*H:(n*L+l+1)*H], rows[(l*N+n)*H:(l*N+n+1)*H], h.layerW[l*H:(l+1)*H]
			for c := range dst {
				dst[c] = src[c] + lw[c]
			}
		}
	}
	kp, vp := make([]float32, N*L*H), make([]float32, N*L*H)
	h.k.MatMul(kp, H, xs, H, N*L, nil, th)
	h.v.MatMul(vp, H, xs, H, N*L, nil, th)
	lens, offs := make([]int, N), make([]int, N+1)
	for n := range lens {
		lens[n], offs[n+1] = L, (n+1)*L
	}
	return h.rest(kp, vp, lens, offs, make([]float32, N*L), th)
}

// rest is the head after its key and value projections kp, vp (rows of
// sequence n at offs[n]…, lens[n] of them): per head P =
// softmax(latents·Kᵀ/√d + keyBias), Z = (P·V)·Woᵀ, Y = Z + fc2(GELU(fc1(Z))),
// and the mean of Y's rows, N×H.
func (hc *poolingHead) rest(kp, vp []float32, lens, offs []int, keyBias []float32, th int) []float32 {
	H, N, r := hc.H, len(lens), hc.r
	d := H / hc.h
	scale := float32(1 / math.Sqrt(float64(d)))
	c := make([]float32, N*r*H)
	ops.ParallelFor(N*hc.h, th, func(lo, hi int) {
		var s []float32
		for task := lo; task < hi; task++ {
			n, h := task/hc.h, task%hc.h
			L, o := lens[n], offs[n]
			s = growF(&s, L)
			for i := 0; i < r; i++ {
				q := hc.latents[i*H+h*d : i*H+h*d+d]
				for j := 0; j < L; j++ {
					kr := kp[(o+j)*H+h*d : (o+j)*H+h*d+d]
					var dot float32
					for t, qv := range q {
						dot += qv * kr[t]
					}
					s[j] = dot
				}
				inv := 1 / ops.ExpScaled(s, keyBias[o:o+L], scale)
				out := c[(n*r+i)*H+h*d : (n*r+i)*H+h*d+d]
				for j, p := range s {
					vr := vp[(o+j)*H+h*d : (o+j)*H+h*d+d]
					for t, vv := range vr {
						out[t] += p * vv
					}
				}
				for t := range out {
					out[t] *= inv
				}
			}
		}
	})
	z, u := make([]float32, N*r*H), make([]float32, N*r*H)
	hc.o.MatMul(z, H, c, H, N*r, nil, th)
	hc.fc1.MatMul(u, H, z, H, N*r, hc.b1, th)
	ops.GELUInPlace(u)
	y := c // reused: y = z + fc2(u)
	hc.fc2.MatMul(y, H, u, H, N*r, hc.b2, th)
	out := make([]float32, N*H)
	for n := 0; n < N; n++ {
		o := out[n*H : n*H+H]
		for i := 0; i < r; i++ {
			zr, yr := z[(n*r+i)*H:(n*r+i+1)*H], y[(n*r+i)*H:(n*r+i+1)*H]
			for t := range o {
				o[t] += zr[t] + yr[t]
			}
		}
		for t := range o {
			o[t] /= float32(r)
		}
	}
	return out
}
