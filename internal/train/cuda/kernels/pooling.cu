// Pooling of the last hidden state into one vector per sequence
// (internal/ops/pooling.go; launched by pooling.go) and L2 normalisation
// (train/objective NormalizeRows / NormalizeRowsBackward). Modes: 0 mean over the
// mask (weighted by the mask value, count clamped at 1e-9), 1 [CLS]
// (position 0), 2 last token (position lens[n]−1).

// pool_forward: one block per sequence, threads over C.
extern "C" __global__ void pool_forward(float *out, const float *hidden, const float *mask, const int *lens,
		int N, int T, int C, int mode) {
	const int n = blockIdx.x;
	if (n >= N) return;
	const int L = lens[n];
	float *o = out + (i64)n * C;
	if (mode == 0) {
		float cnt = 0.f;
		for (int t = 0; t < L; t++) cnt += mask[(i64)n * T + t];
		cnt = fmaxf(cnt, 1e-9f);
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float a = 0.f;
			for (int t = 0; t < L; t++) {
				const float mk = mask[(i64)n * T + t];
				if (mk != 0.f) a += hidden[((i64)n * T + t) * C + c] * mk;
			}
			o[c] = a / cnt;
		}
		return;
	}
	const int t = mode == 1 ? 0 : max(L - 1, 0);
	for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = hidden[((i64)n * T + t) * C + c];
}

// pool_backward adds to dhidden (N×T×C) the gradient given dpooled (N×C).
// Grid (N, T): each block handles one position.
extern "C" __global__ void pool_backward(float *dhidden, const float *dpooled, const float *mask, const int *lens,
		int N, int T, int C, int mode) {
	const int n = blockIdx.x, t = blockIdx.y;
	if (n >= N || t >= T) return;
	const int L = lens[n];
	const float *d = dpooled + (i64)n * C;
	float *dh = dhidden + ((i64)n * T + t) * C;
	if (mode == 0) {
		const float mk = t < L ? mask[(i64)n * T + t] : 0.f;
		if (mk == 0.f) return;
		float cnt = 0.f;
		for (int u = 0; u < L; u++) cnt += mask[(i64)n * T + u];
		cnt = fmaxf(cnt, 1e-9f);
		for (int c = threadIdx.x; c < C; c += blockDim.x) dh[c] += d[c] * mk / cnt;
		return;
	}
	const int want = mode == 1 ? 0 : L - 1;
	if (t != want) return;
	for (int c = threadIdx.x; c < C; c += blockDim.x) dh[c] += d[c];
}

// l2norm_forward: out = x/max(|x|, 1e-12) per row, norms saved. One warp
// per row.
extern "C" __global__ void l2norm_forward(float *out, float *norms, const float *x, int rows, int C) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *v = x + (i64)row * C;
	float s = 0.f;
	for (int c = lane; c < C; c += 32) s += v[c] * v[c];
	const float nrm = fmaxf(sqrtf(warp_sum(s)), 1e-12f);
	float *o = out + (i64)row * C;
	for (int c = lane; c < C; c += 32) o[c] = v[c] / nrm;
	if (lane == 0 && norms) norms[row] = nrm;
}

// l2norm_backward: dx = (g − (g·x̂)x̂)/|x| per row, written (not added).
extern "C" __global__ void l2norm_backward(float *dx, const float *g, const float *xn, const float *norms, int rows, int C) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *gr = g + (i64)row * C, *xr = xn + (i64)row * C;
	float proj = 0.f;
	for (int c = lane; c < C; c += 32) proj += gr[c] * xr[c];
	proj = warp_sum(proj);
	const float inv = 1.f / norms[row];
	float *o = dx + (i64)row * C;
	for (int c = lane; c < C; c += 32) o[c] = (gr[c] - proj * xr[c]) * inv;
}
