// The optimizer (train/optim.go; launched by optim.go): AdamW's update and
// the sums of squares of the global gradient norm that clipping scales by.

// AdamW (torch.optim.AdamW; train/optim.go AdamW.Update) on float32 master
// weights. The host computes the per-step scalars exactly as the CPU does:
// decay = 1 − lr·wd (1 for NoDecay params), stepSize = lr/(1 − β1^t),
// invSqrtBC2 = 1/√(1 − β2^t). wbf (may be NULL) receives the updated
// weights in bf16 for the next step's bf16 matrix products.
extern "C" __global__ void adamw_update(float *w, const float *g, float *m, float *v, bf16_t *wbf, i64 n,
		float b1, float b2, float eps, float decay, float stepSize, float invSqrtBC2) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float gi = g[i];
	const float mi = b1 * m[i] + (1.f - b1) * gi;
	const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
	m[i] = mi;
	v[i] = vi;
	const float denom = sqrtf(vi) * invSqrtBC2 + eps;
	const float wi = w[i] * decay - stepSize * mi / denom;
	w[i] = wi;
	if (wbf) wbf[i] = f32_to_bf16(wi);
}

// sumsq_partial: partial[blockIdx.x] = Σ x² over this block's grid-stride
// share of x[0:n) (the gradient-norm clip; the host adds the partials in
// float64).
extern "C" __global__ void sumsq_partial(float *partial, const float *x, i64 n) {
	__shared__ float sh[32];
	float a = 0.f;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
		const float v = x[i];
		a += v * v;
	}
	a = block_sum(a, sh);
	if (threadIdx.x == 0) partial[blockIdx.x] = a;
}
