// Activations (internal/ops/activation.go; launched by activation.go):
// gelu with erf, gelu_new / gelu_pytorch_tanh, relu, and the
// cross-encoder pooler's tanh.

// Activations, numbered as in the Go wrapper: 0 gelu (erf), 1 gelu_new /
// gelu_pytorch_tanh, 2 relu (activation.go actCode).
#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f

extern "C" __global__ void act_forward(float *out, const float *inp, i64 n, int act) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float v = inp[i];
	float o;
	if (act == 0) {
		o = 0.5f * v * (1.f + erff(v * INV_SQRT2));
	} else if (act == 1) {
		o = 0.5f * v * (1.f + tanhf(SQRT_2_OVER_PI * (v + 0.044715f * v * v * v)));
	} else {
		o = fmaxf(v, 0.f);
	}
	out[i] = o;
}

// act_backward turns d (∂loss/∂act(x)) into ∂loss/∂x in place.
extern "C" __global__ void act_backward(float *d, const float *inp, i64 n, int act) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float v = inp[i];
	float g;
	if (act == 0) {
		const float cdf = 0.5f * (1.f + erff(v * INV_SQRT2));
		const float pdf = INV_SQRT2PI * expf(-0.5f * v * v);
		g = cdf + v * pdf;
	} else if (act == 1) {
		const float t = tanhf(SQRT_2_OVER_PI * (v + 0.044715f * v * v * v));
		g = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * SQRT_2_OVER_PI * (1.f + 3.f * 0.044715f * v * v);
	} else {
		if (v <= 0.f) d[i] = 0.f; // as the CPU: a zero, even for an infinite d
		return;
	}
	d[i] *= g;
}

// tanh_forward / tanh_backward: the cross-encoder pooler's activation;
// backward uses the saved output y: d *= 1 − y².
extern "C" __global__ void tanh_forward(float *out, const float *inp, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = tanhf(inp[i]);
}

extern "C" __global__ void tanh_backward(float *d, const float *y, i64 n) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) d[i] *= 1.f - y[i] * y[i];
}
