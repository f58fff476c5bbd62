// LayerNorm over the last dimension (internal/ops/layernorm.go; launched by
// layernorm.go). One warp per row; two passes (mean, then variance of
// the centred values) as the CPU does, in float rather than float64.

extern "C" __global__ void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
		const float *w, const float *b, int rows, int C, float eps) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *x = inp + (i64)row * C;
	float s = 0.f;
	for (int c = lane; c < C; c += 32) s += x[c];
	const float mu = warp_sum(s) / C;
	float v = 0.f;
	for (int c = lane; c < C; c += 32) {
		const float d = x[c] - mu;
		v += d * d;
	}
	const float rs = 1.f / sqrtf(warp_sum(v) / C + eps);
	float *o = out + (i64)row * C;
	for (int c = lane; c < C; c += 32) o[c] = (x[c] - mu) * rs * w[c] + b[c];
	if (lane == 0) {
		if (mean) mean[row] = mu;
		if (rstd) rstd[row] = rs;
	}
}

// layernorm_backward_input adds to dinp the input gradient given dout,
// with the forward's saved mean and rstd.
extern "C" __global__ void layernorm_backward_input(float *dinp, const float *dout, const float *inp,
		const float *w, const float *mean, const float *rstd, int rows, int C) {
	const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (row >= rows) return;
	const float *x = inp + (i64)row * C, *d = dout + (i64)row * C;
	const float mu = mean[row], rs = rstd[row];
	float dm = 0.f, dnn = 0.f;
	for (int c = lane; c < C; c += 32) {
		const float xh = (x[c] - mu) * rs, dn = w[c] * d[c];
		dm += dn;
		dnn += dn * xh;
	}
	dm = warp_sum(dm) / C;
	dnn = warp_sum(dnn) / C;
	float *di = dinp + (i64)row * C;
	for (int c = lane; c < C; c += 32) {
		const float xh = (x[c] - mu) * rs, dn = w[c] * d[c];
		di[c] += (dn - dm - xh * dnn) * rs;
	}
}

// layernorm_backward_params_partial writes, for each chunk of rowsPerChunk
// rows (blockIdx.y), the partial sums of dw = Σ x̂·dout and db = Σ dout per
// column into pdw/pdb[chunk·C + c]; colsum_finish adds the chunks up. Block
// 32×8: 32 adjacent columns (coalesced) × 8 row lanes. Fixed order, so the
// sums are reproducible. mean NULL is RMSNorm's x̂ = x·rstd (no centring).
extern "C" __global__ void layernorm_backward_params_partial(float *pdw, float *pdb, const float *dout,
		const float *inp, const float *mean, const float *rstd, int rows, int C, int rowsPerChunk) {
	__shared__ float sw[8][33], sb[8][33];
	const int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
	const int r0 = chunk * rowsPerChunk, r1 = min(rows, r0 + rowsPerChunk);
	float aw = 0.f, ab = 0.f;
	if (c < C) {
		for (int r = r0 + threadIdx.y; r < r1; r += 8) {
			const float d = dout[(i64)r * C + c];
			aw += (inp[(i64)r * C + c] - (mean ? mean[r] : 0.f)) * rstd[r] * d;
			ab += d;
		}
	}
	sw[threadIdx.y][threadIdx.x] = aw;
	sb[threadIdx.y][threadIdx.x] = ab;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		for (int k = 1; k < 8; k++) {
			aw += sw[k][threadIdx.x];
			ab += sb[k][threadIdx.x];
		}
		if (pdw) pdw[(i64)chunk * C + c] = aw;
		if (pdb) pdb[(i64)chunk * C + c] = ab;
	}
}
