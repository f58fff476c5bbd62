// SwiGLU (internal/ops/swiglu.go; launched by swiglu.go).

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
