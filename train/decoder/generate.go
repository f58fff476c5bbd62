package decoder

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/anna-search/anna/train/ops"
	"github.com/anna-search/anna/train/tensor"
)

// KVCache is incremental decoding's state: every layer's rotated keys and
// values of the positions decoded so far, for N sequences of at most T
// positions. Sequence n holds Len[n] positions; the next token goes at
// position Len[n].
type KVCache struct {
	N, T int
	Len  []int
	k, v [][]float32 // per layer: N×T rows of KV·D
	rope *ops.Rope   // positions 0..T−1
	// The frozen weights packed once for the steps' few-row products
	// (layer × projection, and the LM head): a step would otherwise pack
	// each whole weight again, which costs more than multiplying by it.
	packed [][7]*tensor.PackedB
	head   *tensor.PackedB

	// Step's scratch, N rows each.
	x, xn, q, kn, vn, ctx, h, hidden, rstd []float32
	g, u, act, scores, logits              []float32
	qraw, kraw, qrstd, krstd               []float32
	xa                                     [7][]float32
}

// generating refuses the model states incremental decoding does not
// follow: bidirectional attention (a new token would change the earlier
// ones) and Recompute (Forward keeps one layer's keys and values).
func (m *Model) generating() error {
	if !m.Causal {
		return fmt.Errorf("decoder: generation needs causal attention")
	}
	if m.Recompute {
		return fmt.Errorf("decoder: generation needs Recompute off (the prefill's keys and values of every layer)")
	}
	return nil
}

// Prefill runs the prompts (a right-padded batch) through Forward, keeps
// every layer's keys and values in a cache with room for maxNew more
// positions, and returns it with the logits of each prompt's last token
// (N×V): the distribution of its first new token.
func (m *Model) Prefill(b *Batch, maxNew int) (*KVCache, []float32, error) {
	if err := m.generating(); err != nil {
		return nil, nil, err
	}
	if maxNew < 0 {
		return nil, nil, fmt.Errorf("decoder: maxNew %d < 0", maxNew)
	}
	a, err := m.Forward(b)
	if err != nil {
		return nil, nil, err
	}
	cfg := &m.Cfg
	T := b.T + maxNew
	if T > cfg.MaxPositionEmbeddings {
		return nil, nil, fmt.Errorf("decoder: %d prompt positions + %d new exceed max_position_embeddings %d", b.T, maxNew, cfg.MaxPositionEmbeddings)
	}
	C, KV, D := cfg.HiddenSize, cfg.KVHeads(), cfg.HeadDim()
	c := &KVCache{N: b.N, T: T, Len: append([]int(nil), a.lens...), rope: ops.NewRope(T, D, cfg.RopeTheta)}
	w := KV * D
	for l := range m.layers {
		la := a.layerActs(l)
		k, v := make([]float32, b.N*T*w), make([]float32, b.N*T*w)
		for n := 0; n < b.N; n++ {
			copy(k[n*T*w:], la.k[n*b.T*w:(n*b.T+a.lens[n])*w])
			copy(v[n*T*w:], la.v[n*b.T*w:(n*b.T+a.lens[n])*w])
		}
		c.k, c.v = append(c.k, k), append(c.v, v)
	}
	for l := range m.layers {
		var ps [7]*tensor.PackedB
		for i, lin := range m.layers[l].proj {
			ps[i] = lin.PackW()
		}
		c.packed = append(c.packed, ps)
	}
	c.head = tensor.PackBT(m.LMHead().W, cfg.VocabSize, C, C)
	last := make([]float32, b.N*C)
	for n := 0; n < b.N; n++ {
		r := n*b.T + a.lens[n] - 1
		copy(last[n*C:n*C+C], a.Hidden[r*C:r*C+C])
	}
	return c, m.logits(c, last), nil
}

// logits maps N final hidden states (N×C) to the vocabulary (N×V) through
// the LM head; the slice is the cache's, overwritten by the next call.
func (m *Model) logits(c *KVCache, hidden []float32) []float32 {
	C, V := m.Cfg.HiddenSize, m.Cfg.VocabSize
	c.logits = grow(c.logits, c.N*V)
	tensor.GemmPacked(c.N, 1, hidden, C, c.head, 0, c.logits, V, m.threads())
	return c.logits
}

// Step feeds one token per sequence (ids[n] at position c.Len[n]), adds its
// keys and values to the cache and returns the logits of the token after it
// (N×V, overwritten by the next Step). Its arithmetic is Forward's, one row
// per sequence: the logits equal those Forward gives the same tokens at the
// same positions (TestStepMatchesForward).
func (m *Model) Step(c *KVCache, ids []int32) ([]float32, error) {
	if err := m.generating(); err != nil {
		return nil, err
	}
	cfg := &m.Cfg
	if len(ids) != c.N {
		return nil, fmt.Errorf("decoder: %d tokens for %d sequences", len(ids), c.N)
	}
	for n, id := range ids {
		if c.Len[n] >= c.T {
			return nil, fmt.Errorf("decoder: sequence %d is full (%d positions)", n, c.T)
		}
		if id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("decoder: token id %d outside the vocabulary of %d", id, cfg.VocabSize)
		}
	}
	N, C, F, D := c.N, cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	H, KV := cfg.NumAttentionHeads, cfg.KVHeads()
	eps := float32(cfg.RMSNormEps)
	th := m.threads()
	c.x, c.xn, c.h, c.hidden = grow(c.x, N*C), grow(c.xn, N*C), grow(c.h, N*C), grow(c.hidden, N*C)
	c.q, c.kn, c.vn, c.ctx = grow(c.q, N*H*D), grow(c.kn, N*KV*D), grow(c.vn, N*KV*D), grow(c.ctx, N*H*D)
	c.g, c.u, c.act, c.rstd = grow(c.g, N*F), grow(c.u, N*F), grow(c.act, N*F), grow(c.rstd, N)
	c.scores = grow(c.scores, N*H*c.T)
	if cfg.QKNorm() {
		c.qraw, c.kraw, c.qrstd, c.krstd = grow(c.qraw, N*H*D), grow(c.kraw, N*KV*D), grow(c.qrstd, N*H), grow(c.krstd, N*KV)
	}
	m.EmbedTokens(c.x, ids)
	for l := range m.layers {
		ly, pk := &m.layers[l], &c.packed[l]
		for i, lin := range ly.proj {
			if lin.LoRA != nil {
				c.xa[i] = grow(c.xa[i], N*lin.LoRA.Rank)
			}
		}
		ops.RMSNormForward(c.xn, c.rstd, c.x, ly.ln1.W, N, C, eps, th)
		if cfg.QKNorm() {
			ly.q().ForwardPacked(pk[0], c.qraw, c.xn, c.xa[0], N, th)
			ly.k().ForwardPacked(pk[1], c.kraw, c.xn, c.xa[1], N, th)
			ops.RMSNormForward(c.q, c.qrstd, c.qraw, ly.qn.W, N*H, D, eps, th)
			ops.RMSNormForward(c.kn, c.krstd, c.kraw, ly.kn.W, N*KV, D, eps, th)
		} else {
			ly.q().ForwardPacked(pk[0], c.q, c.xn, c.xa[0], N, th)
			ly.k().ForwardPacked(pk[1], c.kn, c.xn, c.xa[1], N, th)
		}
		ly.v().ForwardPacked(pk[2], c.vn, c.xn, c.xa[2], N, th)
		c.rope.ForwardAt(c.q, c.Len, H)
		c.rope.ForwardAt(c.kn, c.Len, KV)
		w := KV * D
		for n := 0; n < N; n++ {
			r := (n*c.T + c.Len[n]) * w
			copy(c.k[l][r:r+w], c.kn[n*w:n*w+w])
			copy(c.v[l][r:r+w], c.vn[n*w:n*w+w])
		}
		m.attendCached(c, l)
		ly.o().ForwardPacked(pk[3], c.h, c.ctx, c.xa[3], N, th)
		ops.AddInPlace(c.h, c.x, th)
		ops.RMSNormForward(c.xn, c.rstd, c.h, ly.ln2.W, N, C, eps, th)
		ly.gate().ForwardPacked(pk[4], c.g, c.xn, c.xa[4], N, th)
		ly.up().ForwardPacked(pk[5], c.u, c.xn, c.xa[5], N, th)
		ops.SwiGLUForward(c.act, c.g, c.u, th)
		ly.down().ForwardPacked(pk[6], c.x, c.act, c.xa[6], N, th)
		ops.AddInPlace(c.x, c.h, th)
	}
	ops.RMSNormForward(c.hidden, c.rstd, c.x, m.norm.W, N, C, eps, th)
	for n := range c.Len {
		c.Len[n]++
	}
	return m.logits(c, c.hidden), nil
}

// attendCached is causal attention of each sequence's new query (c.q, at
// position c.Len[n]) over the cached keys and values 0..c.Len[n] of layer
// l, into c.ctx: the last row of Attention.Forward's softmax(QKᵀ/√D)·V.
func (m *Model) attendCached(c *KVCache, l int) {
	cfg := &m.Cfg
	H, KV, D := cfg.NumAttentionHeads, cfg.KVHeads(), cfg.HeadDim()
	rep := H / KV
	scale := float32(1 / math.Sqrt(float64(D)))
	ks := KV * D
	ops.ParallelFor(c.N*H, m.threads(), func(lo, hi int) {
		for task := lo; task < hi; task++ {
			n, h := task/H, task%H
			g := h / rep
			L := c.Len[n] + 1
			q := c.q[(n*H+h)*D : (n*H+h)*D+D]
			sc := c.scores[task*c.T : task*c.T+L]
			mx := float32(math.Inf(-1))
			for j := range sc {
				kr := c.k[l][(n*c.T+j)*ks+g*D : (n*c.T+j)*ks+g*D+D]
				var s float32
				for i, qv := range q {
					s += qv * kr[i]
				}
				sc[j] = s * scale
				mx = max(mx, sc[j])
			}
			var sum float32
			for j := range sc {
				sc[j] = ops.Exp32(sc[j] - mx)
				sum += sc[j]
			}
			out := c.ctx[(n*H+h)*D : (n*H+h)*D+D]
			clear(out)
			for j, p := range sc {
				p /= sum
				vr := c.v[l][(n*c.T+j)*ks+g*D : (n*c.T+j)*ks+g*D+D]
				for i, vv := range vr {
					out[i] += p * vv
				}
			}
		}
	})
}

// GenerateOptions set how Generate samples.
type GenerateOptions struct {
	MaxNew int     // new tokens at most per prompt
	Stop   []int32 // tokens that end a sequence (not returned): EOS, the chat template's end of turn
	// Temperature 0 decodes greedily (the most likely token, the lowest id
	// on a tie); above 0 the logits are divided by it and sampled, within
	// the smallest set of tokens whose probability reaches TopP (0 or 1:
	// all).
	Temperature float64
	TopP        float64
	Seed        uint64 // the sampling's seed: equal seeds, equal outputs
	// Seeds, when set, seed each prompt's sampling on its own (one per
	// prompt, instead of Seed and the prompt's place in the batch), so a
	// prompt's output does not depend on the prompts beside it.
	Seeds []uint64
}

// Generate continues each prompt (token ids, none empty) and returns its
// new tokens, up to the first stop token (excluded) or MaxNew. Prompts of
// different lengths run together (right-padded, each at its own
// positions); a finished sequence is fed its last token again until all
// are done, its output no longer read. ctx is checked between tokens.
func (m *Model) Generate(ctx context.Context, prompts [][]int32, o GenerateOptions) ([][]int32, error) {
	if len(prompts) == 0 {
		return nil, nil
	}
	T := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("decoder: prompt %d is empty", i)
		}
		T = max(T, len(p))
	}
	b := &Batch{N: len(prompts), T: T, IDs: make([]int32, len(prompts)*T), Mask: make([]float32, len(prompts)*T)}
	for n, p := range prompts {
		copy(b.IDs[n*T:], p)
		for t := range p {
			b.Mask[n*T+t] = 1
		}
	}
	c, logits, err := m.Prefill(b, o.MaxNew)
	if err != nil {
		return nil, err
	}
	stop := map[int32]bool{}
	for _, s := range o.Stop {
		stop[s] = true
	}
	if o.Seeds != nil && len(o.Seeds) != len(prompts) {
		return nil, fmt.Errorf("decoder: %d seeds for %d prompts", len(o.Seeds), len(prompts))
	}
	rngs := make([]*rand.Rand, len(prompts))
	for n := range rngs {
		if o.Seeds != nil {
			rngs[n] = rand.New(rand.NewPCG(o.Seeds[n], 0x5eed))
		} else {
			rngs[n] = rand.New(rand.NewPCG(o.Seed, uint64(n)))
		}
	}
	V := m.Cfg.VocabSize
	out := make([][]int32, len(prompts))
	done := make([]bool, len(prompts))
	next := make([]int32, len(prompts))
	for step := 0; step < o.MaxNew; step++ {
		all := true
		for n := range prompts {
			if done[n] {
				continue
			}
			tok := pick(logits[n*V:n*V+V], o, rngs[n])
			next[n] = tok
			if stop[tok] {
				done[n] = true
				continue
			}
			out[n] = append(out[n], tok)
			all = false
		}
		if all || step == o.MaxNew-1 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if logits, err = m.Step(c, next); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pick chooses the next token from one sequence's logits.
func pick(logits []float32, o GenerateOptions, rng *rand.Rand) int32 {
	if o.Temperature <= 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return int32(best)
	}
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	type cand struct {
		id int
		p  float64
	}
	cands := make([]cand, len(logits))
	var sum float64
	for i, v := range logits {
		p := math.Exp(float64(v-mx) / o.Temperature)
		cands[i] = cand{i, p}
		sum += p
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].p != cands[j].p {
			return cands[i].p > cands[j].p
		}
		return cands[i].id < cands[j].id
	})
	keep := len(cands)
	if o.TopP > 0 && o.TopP < 1 {
		var acc float64
		for i, c := range cands {
			acc += c.p / sum
			if acc >= o.TopP {
				keep = i + 1
				break
			}
		}
	}
	var kept float64
	for _, c := range cands[:keep] {
		kept += c.p
	}
	r := rng.Float64() * kept
	for _, c := range cands[:keep] {
		if r -= c.p; r < 0 {
			return int32(c.id)
		}
	}
	return int32(cands[keep-1].id)
}
