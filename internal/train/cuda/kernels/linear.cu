// A linear layer's kernels beside cuBLAS's products (internal/ops/linear.go;
// launched by linear.go): the bias add and the column sums of its
// gradient (and of LayerNorm's parameter gradients), in a fixed order.

// bias_add: out[r,c] += b[c] (linear layers: out = x·Wᵀ + b).
extern "C" __global__ void bias_add(float *out, const float *b, int rows, int cols) {
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (i64)rows * cols) out[i] += b[i % cols];
}

// colsum_partial: like layernorm_backward_params_partial's db, for any
// rows×cols matrix x: partial[chunk·cols + c] = Σ_{rows in chunk} x[r,c].
extern "C" __global__ void colsum_partial(float *partial, const float *x, int rows, int cols, int rowsPerChunk) {
	__shared__ float s[8][33];
	const int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
	const int r0 = chunk * rowsPerChunk, r1 = min(rows, r0 + rowsPerChunk);
	float a = 0.f;
	if (c < cols)
		for (int r = r0 + threadIdx.y; r < r1; r += 8) a += x[(i64)r * cols + c];
	s[threadIdx.y][threadIdx.x] = a;
	__syncthreads();
	if (threadIdx.y == 0 && c < cols) {
		for (int k = 1; k < 8; k++) a += s[k][threadIdx.x];
		partial[(i64)chunk * cols + c] = a;
	}
}

// colsum_finish: dst[c] += Σ_chunk partial[chunk·cols + c].
extern "C" __global__ void colsum_finish(float *dst, const float *partial, int chunks, int cols) {
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= cols) return;
	float a = 0.f;
	for (int k = 0; k < chunks; k++) a += partial[(i64)k * cols + c];
	dst[c] += a;
}
