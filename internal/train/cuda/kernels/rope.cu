// Rotary position embeddings (internal/ops/rope.go; launched by rope.go).

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
