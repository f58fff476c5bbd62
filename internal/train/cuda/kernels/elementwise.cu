// Elementwise ops (launched by elementwise.go): residual adds, scaling
// (gradient clipping, loss scaling) and the float32 ⇄ bf16 casts.

extern "C" __global__ void add_inplace(float *dst, const float *src, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dst[i] += src[i];
}

extern "C" __global__ void scale_inplace(float *x, float s, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}

// Casts for bf16 matrix products: weights and activations go to bf16 for
// cuBLAS, master weights and accumulation stay float32.
extern "C" __global__ void cast_f32_bf16(bf16_t *out, const float *in, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = f32_to_bf16(in[i]);
}

extern "C" __global__ void cast_bf16_f32(float *out, const bf16_t *in, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = bf16_to_f32(in[i]);
}
