// Llama-family decoder ops (train/ops: norm.go, rope.go, swiglu.go,
// attention.go's grouped-query layout; train/decoder/forward.go).

// gather_rows: out[r] = table[ids[r]] (rows of C); an id outside [0, V)
// gives a NaN row (the Go side checks ids first).
extern "C" __global__ void gather_rows(float *out, const int *ids, const float *table, int rows, int C, int V) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (i64)rows * C) return;
	const int r = i / C, c = i % C, id = ids[r];
	out[i] = (id < 0 || id >= V) ? __int_as_float(0x7fc00000) : table[(i64)id * C + c];
}

// scatter_add_rows: dtable[ids[r]] += d[r] for the rows whose mask is not
// zero (gather_rows' backward: the token embedding's gradient). One thread
// per element; rows sharing a token add atomically, so the sums are the
// CPU's but their order (and so the last bits) is not reproducible run to
// run, as embedding_backward's.
extern "C" __global__ void scatter_add_rows(float *dtable, const float *d, const int *ids, const float *mask,
		int rows, int C, int V) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (i64)rows * C) return;
	const int r = i / C, c = i % C, id = ids[r];
	if (mask[r] == 0.f || id < 0 || id >= V) return;
	atomicAdd(dtable + (i64)id * C + c, d[i]);
}

// rmsnorm_forward: out[r] = x[r]·rstd[r]⊙w, rstd = 1/sqrt(mean(x²)+eps).
// One warp per row.
extern "C" __global__ void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int rows, int C, float eps) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *x = inp + (i64)row * C;
	float s = 0.f;
	for (int c = lane; c < C; c += 32) s += x[c] * x[c];
	const float rs = 1.f / sqrtf(warp_sum(s) / C + eps);
	float *o = out + (i64)row * C;
	for (int c = lane; c < C; c += 32) o[c] = x[c] * rs * w[c];
	if (lane == 0) rstd[row] = rs;
}

// rmsnorm_backward_input adds to dinp the input gradient given dout:
// dx = rstd·(w⊙d − n·mean(w⊙d⊙n)), n = x·rstd. One warp per row.
extern "C" __global__ void rmsnorm_backward_input(float *dinp, const float *dout, const float *inp, const float *w,
		const float *rstd, int rows, int C) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *x = inp + (i64)row * C, *d = dout + (i64)row * C;
	const float rs = rstd[row];
	float dot = 0.f;
	for (int c = lane; c < C; c += 32) dot += w[c] * d[c] * x[c] * rs;
	const float m = warp_sum(dot) / C;
	float *di = dinp + (i64)row * C;
	for (int c = lane; c < C; c += 32) di[c] += rs * (w[c] * d[c] - x[c] * rs * m);
}

// rope_apply rotates x in place (sign 1: forward; −1: the backward's
// transposed rotation): x is rows of heads×D, row r at position r % T;
// with the halves x1 = x[:D/2], x2 = x[D/2:] of each head,
// x1' = x1·cos − x2·sin, x2' = x2·cos + x1·sin. cos, sin: T×D/2.
// One thread per (row, head, i < D/2).
extern "C" __global__ void rope_apply(float *x, const float *cosT, const float *sinT, int rows, int T, int heads, int D, float sign) {
	const int h2 = D / 2;
	const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (i64)rows * heads * h2) return;
	const int i = k % h2;
	const i64 rh = k / h2;
	const int r = rh / heads, hd = rh % heads, t = r % T;
	float *p = x + (i64)r * heads * D + hd * D;
	const float c = cosT[t * h2 + i], s = sign * sinT[t * h2 + i];
	const float a = p[i], b = p[i + h2];
	p[i] = a * c - b * s;
	p[i + h2] = b * c + a * s;
}

// swiglu_forward: out = silu(g)⊙u, silu(x) = x·σ(x).
extern "C" __global__ void swiglu_forward(float *out, const float *g, const float *u, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float x = g[i], s = 1.f / (1.f + expf(-x));
	out[i] = x * s * u[i];
}

// swiglu_backward adds to dg and du the gradient given dout:
// du = d·silu(g), dg = d·u·σ(g)·(1 + g·(1−σ(g))).
extern "C" __global__ void swiglu_backward(float *dg, float *du, const float *dout, const float *g, const float *u, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float x = g[i], d = dout[i], s = 1.f / (1.f + expf(-x));
	du[i] += d * x * s;
	dg[i] += d * u[i] * s * (1.f + x * (1.f - s));
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
