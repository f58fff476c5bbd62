package llama

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tensor"
)

// KVCache is incremental decoding's state: every layer's rotated keys and
// values of the positions fed so far, for N sequences of at most T
// positions. Sequence n holds Len[n] positions; its next token goes at
// position Len[n].
type KVCache struct {
	N, T int
	Len  []int
	k, v [][]float32 // per layer: N×T rows of KV·D
	rope *ops.Rope   // positions 0..T−1
	// The frozen weights packed once for the cache's products (layer ×
	// projection, and the LM head): a decoding step multiplies a few rows
	// by each weight, and packing it anew every time would cost more than
	// the product.
	packed [][7]*tensor.PackedB
	head   *tensor.PackedB

	// Extend's scratch, one row per token fed: the layers' activations
	// (one set for every layer), the final norm's and the head's.
	a                          LayerActs
	rstd, last, hidden, logits []float32
	scores                     [][]float32 // per goroutine
}

// NewCache makes an empty cache for n sequences of up to t positions,
// packing the model's weights for it (the weights must not change while it
// is used). Generation needs causal attention (a new token would otherwise
// change the earlier ones).
func (m *Model) NewCache(n, t int) (*KVCache, error) {
	if !m.Causal {
		return nil, fmt.Errorf("llama: generation needs causal attention")
	}
	cfg := &m.Cfg
	if n <= 0 || t <= 0 || t > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("llama: a cache of %d sequences × %d positions (max_position_embeddings %d)", n, t, cfg.MaxPositionEmbeddings)
	}
	w := cfg.KVHeads() * cfg.HeadDim()
	c := &KVCache{N: n, T: t, Len: make([]int, n), rope: ops.NewRope(t, cfg.HeadDim(), cfg.RopeTheta)}
	for l := range m.Layers {
		c.k, c.v = append(c.k, make([]float32, n*t*w)), append(c.v, make([]float32, n*t*w))
		var ps [7]*tensor.PackedB
		for i, lin := range m.Layers[l].Proj {
			ps[i] = lin.PackW()
		}
		c.packed = append(c.packed, ps)
	}
	c.head = tensor.PackBT(m.LMHead().W, cfg.VocabSize, cfg.HiddenSize, cfg.HiddenSize)
	return c, nil
}

// Copy makes sequence dst's cache a copy of sequence src's (a shared
// prompt prefix fed once).
func (c *KVCache) Copy(dst, src int) {
	w := len(c.k[0]) / (c.N * c.T)
	for l := range c.k {
		copy(c.k[l][dst*c.T*w:(dst*c.T+c.Len[src])*w], c.k[l][src*c.T*w:(src*c.T+c.Len[src])*w])
		copy(c.v[l][dst*c.T*w:(dst*c.T+c.Len[src])*w], c.v[l][src*c.T*w:(src*c.T+c.Len[src])*w])
	}
	c.Len[dst] = c.Len[src]
}

// Step feeds one token per sequence and returns the logits of the next
// (N×V): Extend with a token each.
func (m *Model) Step(c *KVCache, ids []int32) ([]float32, error) {
	if len(ids) != c.N {
		return nil, fmt.Errorf("llama: %d tokens for %d sequences", len(ids), c.N)
	}
	seqs := make([][]int32, c.N)
	for n := range ids {
		seqs[n] = ids[n : n+1]
	}
	return m.Extend(c, seqs)
}

// Extend feeds sequence n the tokens ids[n] (none leaves it as it is) at
// its next positions, adds their keys and values to the cache, and returns
// the logits after each sequence's last token fed (N×V; a sequence fed
// nothing gets the row of zeros; overwritten by the next call). Its
// layers are LayerForward, the trainer's, with the cache's packed weights,
// each row's own position and attention over the cache: the logits equal
// those the trainer's Forward gives the whole sequences at the same
// positions (TestStepMatchesForward).
func (m *Model) Extend(c *KVCache, ids [][]int32) ([]float32, error) {
	cfg := &m.Cfg
	if len(ids) != c.N {
		return nil, fmt.Errorf("llama: tokens for %d sequences, the cache holds %d", len(ids), c.N)
	}
	var flat []int32
	var pos []int
	for n, s := range ids {
		if c.Len[n]+len(s) > c.T {
			return nil, fmt.Errorf("llama: sequence %d: %d positions + %d new exceed the cache's %d", n, c.Len[n], len(s), c.T)
		}
		for t, id := range s {
			if id < 0 || int(id) >= cfg.VocabSize {
				return nil, fmt.Errorf("llama: sequence %d, token %d: id %d outside the vocabulary of %d", n, t, id, cfg.VocabSize)
			}
			flat, pos = append(flat, id), append(pos, c.Len[n]+t)
		}
	}
	R := len(flat)
	C, D, V := cfg.HiddenSize, cfg.HeadDim(), cfg.VocabSize
	KV := cfg.KVHeads()
	eps := float32(cfg.RMSNormEps)
	th := m.threads()
	c.logits = ops.Grow(c.logits, c.N*V)
	clear(c.logits)
	if R == 0 {
		return c.logits, nil
	}
	a := &c.a
	a.X, c.rstd = ops.Grow(a.X, R*C), ops.Grow(c.rstd, c.N)
	m.EmbedTokens(a.X, flat)
	w := KV * D
	rope := func(x []float32, heads int) { c.rope.ForwardAt(x, pos, heads) }
	for l := range m.Layers {
		a.Grow(m, l, R)
		m.LayerForward(l, a, a.X, LayerPass{Rows: R, Packed: &c.packed[l], Rope: rope, Attend: func(a *LayerActs) {
			r := 0
			for n, s := range ids {
				for t := range s {
					at := (n*c.T + c.Len[n] + t) * w
					copy(c.k[l][at:at+w], a.K[r*w:r*w+w])
					copy(c.v[l][at:at+w], a.V[r*w:r*w+w])
					r++
				}
			}
			m.attendCached(c, l, ids)
		}})
	}
	// Only each sequence's last row goes on to the final norm and the head.
	c.last, c.hidden = ops.Grow(c.last, c.N*C), ops.Grow(c.hidden, c.N*C)
	clear(c.last)
	r := 0
	for n, s := range ids {
		r += len(s)
		if len(s) > 0 {
			copy(c.last[n*C:n*C+C], a.X[(r-1)*C:r*C])
		}
		c.Len[n] += len(s)
	}
	ops.RMSNormForward(c.hidden, c.rstd[:c.N], c.last, m.norm.W, c.N, C, eps, th)
	tensor.GemmPacked(c.N, 1, c.hidden, C, c.head, 0, c.logits, V, th)
	for n, s := range ids {
		if len(s) == 0 {
			clear(c.logits[n*V : n*V+V])
		}
	}
	return c.logits, nil
}

// attendCached is causal attention of the rows just fed (c.a.Q; sequence n's
// at positions c.Len[n]…) over the cached keys and values of layer l up to
// each row's own position, into c.a.Ctx: Attention.Forward's
// softmax(QKᵀ/√D)·V for those rows. A sequence fed several tokens (a
// prompt) runs as two products per head; one token, as a plain loop.
func (m *Model) attendCached(c *KVCache, l int, ids [][]int32) {
	cfg := &m.Cfg
	H, KV, D := cfg.NumAttentionHeads, cfg.KVHeads(), cfg.HeadDim()
	rep := H / KV
	scale := float32(1 / math.Sqrt(float64(D)))
	ks, qs := KV*D, H*D
	first := make([]int, len(ids)) // each sequence's first row
	r := 0
	for n, s := range ids {
		first[n] = r
		r += len(s)
	}
	th := m.threads()
	if len(c.scores) < th {
		c.scores = make([][]float32, th)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(th, c.N*H); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var sc tensor.Scratch
			for {
				task := int(next.Add(1) - 1)
				if task >= c.N*H {
					return
				}
				n, h := task/H, task%H
				L := len(ids[n])
				if L == 0 {
					continue
				}
				g := h / rep
				P := c.Len[n] // positions before the first new row
				tot := P + L
				c.scores[w] = ops.Grow(c.scores[w], L*tot)
				p := c.scores[w]
				kb := c.k[l][n*c.T*ks+g*D:]
				vb := c.v[l][n*c.T*ks+g*D:]
				qb := c.a.Q[first[n]*qs+h*D:]
				ob := c.a.Ctx[first[n]*qs+h*D:]
				if L == 1 {
					for j := 0; j < tot; j++ {
						var s float32
						kr := kb[j*ks : j*ks+D]
						for i, qv := range qb[:D] {
							s += qv * kr[i]
						}
						p[j] = s * scale
					}
				} else {
					tensor.GemmSerial(&sc, false, true, L, tot, D, scale, qb, qs, kb, ks, 0, p, tot)
				}
				for t := 0; t < L; t++ {
					ops.SoftmaxPrefix(p[t*tot:t*tot+tot], P+t+1)
				}
				if L == 1 {
					out := ob[:D]
					clear(out)
					for j, pj := range p[:tot] {
						vr := vb[j*ks : j*ks+D]
						for i, vv := range vr {
							out[i] += pj * vv
						}
					}
				} else {
					tensor.GemmSerial(&sc, false, false, L, D, tot, 1, p, tot, vb, ks, 0, ob, qs)
				}
			}
		}(w)
	}
	wg.Wait()
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
	// Prefix is fed before every prompt, once (a shared instruction and
	// few-shot examples).
	Prefix []int32
	// Seeds, when set, seed each prompt's sampling on its own (one per
	// prompt, instead of Seed and the prompt's place in the batch), so a
	// prompt's output does not depend on the prompts beside it.
	Seeds []uint64
}

// Generate continues each prompt (token ids, none empty, after o.Prefix)
// and returns its new tokens, up to the first stop token (excluded) or
// MaxNew. The prompts are fed together, each at its own positions; the
// prefix they share is fed once and its keys and values copied. A finished
// sequence is fed nothing more (it adds no rows to the layers' products
// while the others go on). ctx is checked between tokens.
func (m *Model) Generate(ctx context.Context, prompts [][]int32, o GenerateOptions) ([][]int32, error) {
	ctx = safe.Ctx(ctx)
	if len(prompts) == 0 {
		return nil, nil
	}
	T := 0
	for i, p := range prompts {
		if len(p) == 0 && len(o.Prefix) == 0 {
			return nil, fmt.Errorf("llama: prompt %d is empty", i)
		}
		T = max(T, len(p))
	}
	if o.Seeds != nil && len(o.Seeds) != len(prompts) {
		return nil, fmt.Errorf("llama: %d seeds for %d prompts", len(o.Seeds), len(prompts))
	}
	c, err := m.NewCache(len(prompts), len(o.Prefix)+T+o.MaxNew)
	if err != nil {
		return nil, err
	}
	if len(o.Prefix) > 0 {
		first := make([][]int32, len(prompts))
		first[0] = o.Prefix
		if _, err := m.Extend(c, first); err != nil {
			return nil, err
		}
		for n := 1; n < len(prompts); n++ {
			c.Copy(n, 0)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	logits, err := m.Extend(c, prompts)
	if err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, len(prompts))
	for n := range rngs {
		if o.Seeds != nil {
			rngs[n] = rand.New(rand.NewPCG(o.Seeds[n], 0x5eed))
		} else {
			rngs[n] = rand.New(rand.NewPCG(o.Seed, uint64(n)))
		}
	}
	stop := map[int32]bool{}
	for _, s := range o.Stop {
		stop[s] = true
	}
	V := m.Cfg.VocabSize
	out := make([][]int32, len(prompts))
	done := make([]bool, len(prompts))
	next := make([]int32, len(prompts))
	feed := make([][]int32, len(prompts))
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
		for n := range feed {
			feed[n] = nil
			if !done[n] {
				feed[n] = next[n : n+1]
			}
		}
		if logits, err = m.Extend(c, feed); err != nil {
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
