// RMSNorm (internal/ops/rmsnorm.go; launched by rmsnorm.go). Its gain's
// gradient is layernorm_backward_params_partial's with no mean.

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
