// Multi-head self-attention pieces around cuBLAS's batched products
// (internal/ops/attention.go; launched by attention.go). The Go side
// permutes q, k, v from [N,T,H,hs] (heads interleaved in C) to [N,H,T,hs]
// so that each (n,h) is one matrix of a strided batch, runs
// S = scale·Q·Kᵀ (T×T per (n,h)), the softmax here, ctx = P·V, and
// permutes ctx back.
//
// The CPU computes each sequence only over its first L = lens[n] positions
// and stores its probabilities compactly (L×L at (n,h)·T·T). Here every
// (n,h) has a full T×T block: rows i ≥ L are all zero (so their ctx rows
// are zero, as the CPU leaves them) and keys whose mask is 0 get
// probability 0 (keys ≥ L have mask 0 by definition of L).
//
// Grouped-query attention repeats each key/value head for its query
// heads (repeat_kv) and sums their gradients back (reduce_kv).

// permute_heads: dst[n,h,t,d] = src[n,t,h,d], for N·T·H·hs elements.
extern "C" __global__ void permute_heads(float *dst, const float *src, int N, int T, int H, int hs) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	const i64 total = (i64)N * T * H * hs;
	if (i >= total) return;
	// i indexes dst: ((n·H + h)·T + t)·hs + d
	const int d = i % hs;
	i64 r = i / hs;
	const int t = r % T;
	r /= T;
	const int h = r % H;
	const int n = r / H;
	dst[i] = src[(((i64)n * T + t) * H + h) * hs + d];
}

// unpermute_heads: dst[n,t,h,d] (+)= src[n,h,t,d]; accumulate adds (the
// backward's dq, dk, dv are sums), otherwise it overwrites.
extern "C" __global__ void unpermute_heads(float *dst, const float *src, int N, int T, int H, int hs, int accumulate) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	const i64 total = (i64)N * T * H * hs;
	if (i >= total) return;
	// i indexes dst: ((n·T + t)·H + h)·hs + d, reading coalesced writes
	const int d = i % hs;
	i64 r = i / hs;
	const int h = r % H;
	r /= H;
	const int t = r % T;
	const int n = r / T;
	const float v = src[(((i64)n * H + h) * T + t) * hs + d];
	if (accumulate) dst[i] += v;
	else dst[i] = v;
}

// attn_softmax_forward turns the scaled scores att (N·H blocks of T×T)
// into probabilities in place. One warp per row (b, i), b = n·H + h.
// causal: query i sees keys 0..i only (decoders).
extern "C" __global__ void attn_softmax_forward(float *att, const float *mask, const int *lens, int N, int H, int T, int causal) {
	const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const int lane = threadIdx.x & 31;
	if (row >= (i64)N * H * T) return;
	const int i = row % T, n = (row / T) / H;
	float *p = att + row * T;
	const float *m = mask + (i64)n * T;
	if (i >= lens[n]) {
		for (int j = lane; j < T; j += 32) p[j] = 0.f;
		return;
	}
	const int seen = causal ? i + 1 : T;
	float mx = NEG_INF;
	for (int j = lane; j < seen; j += 32)
		if (m[j] != 0.f) mx = fmaxf(mx, p[j]);
	mx = warp_max(mx);
	float s = 0.f;
	for (int j = lane; j < T; j += 32) {
		const float e = (j < seen && m[j] != 0.f) ? expf(p[j] - mx) : 0.f;
		p[j] = e;
		s += e;
	}
	s = warp_sum(s);
	const float inv = s > 0.f ? 1.f / s : 0.f;
	for (int j = lane; j < T; j += 32) p[j] *= inv;
}

// attn_softmax_backward: dp (∂loss/∂P) becomes ∂loss/∂S' in place, where
// S' are the scaled scores: dS' = P ⊙ (dP − Σ_j P⊙dP). Rows and keys with
// P = 0 get 0.
extern "C" __global__ void attn_softmax_backward(float *dp, const float *att, i64 rows, int T) {
	const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const int lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *p = att + row * T;
	float *d = dp + row * T;
	float dot = 0.f;
	for (int j = lane; j < T; j += 32) dot += p[j] * d[j];
	dot = warp_sum(dot);
	for (int j = lane; j < T; j += 32) d[j] = p[j] * (d[j] - dot);
}

// repeat_kv expands key/value heads for grouped-query attention, in the
// permuted layout: dst[n,h,t,d] = src[n,h/rep,t,d], dst N·H·T·D with
// H = KV·rep.
extern "C" __global__ void repeat_kv(float *dst, const float *src, int N, int KV, int rep, int TD) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	const int H = KV * rep;
	if (i >= (i64)N * H * TD) return;
	const int td = i % TD;
	const i64 nh = i / TD;
	const int h = nh % H, n = nh / H;
	dst[i] = src[((i64)n * KV + h / rep) * TD + td];
}

// reduce_kv is repeat_kv's backward: dst[n,g,t,d] = Σ_r src[n,g·rep+r,t,d]
// (overwrites), the query heads of a group added in order.
extern "C" __global__ void reduce_kv(float *dst, const float *src, int N, int KV, int rep, int TD) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (i64)N * KV * TD) return;
	const int td = i % TD;
	const i64 ng = i / TD;
	const int g = ng % KV, n = ng / KV;
	float s = 0.f;
	for (int r = 0; r < rep; r++) s += src[(((i64)n * KV * rep) + g * rep + r) * TD + td];
	dst[i] = s;
}
