// Embeddings (internal/ops/embedding.go; launched by embedding.go): BERT's
// out[n,t] = wte[ids[n,t]] + wpe[t] + wtt[types[n,t]], and the decoders'
// token rows (gather_rows, and its backward scatter_add_rows).

// embedding_forward: one block per row (n,t). An id or type out of range
// writes NaN to the row, which the trainer's NaN stop catches; the host
// validates batches before they get here.
extern "C" __global__ void embedding_forward(float *out, const int *ids, const int *types,
		const float *wte, const float *wpe, const float *wtt, int rows, int T, int C, int V, int TV) {
	const int r = blockIdx.x;
	if (r >= rows) return;
	const int t = r % T, id = ids[r], ty = types[r];
	float *o = out + (i64)r * C;
	if (id < 0 || id >= V || ty < 0 || ty >= TV) {
		for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = __int_as_float(0x7fc00000);
		return;
	}
	const float *w = wte + (i64)id * C, *p = wpe + (i64)t * C, *y = wtt + (i64)ty * C;
	for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = w[c] + p[c] + y[c];
}

// embedding_backward scatters dout into the tables that are not NULL
// (frozen tables are passed as NULL). Rows share table rows, so the adds
// are atomic: the sums are the CPU's, their order (and so the last bits)
// is not reproducible run to run.
extern "C" __global__ void embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout,
		const int *ids, const int *types, int rows, int T, int C, int V, int TV) {
	const int r = blockIdx.x;
	if (r >= rows) return;
	const int t = r % T, id = ids[r], ty = types[r];
	if (id < 0 || id >= V || ty < 0 || ty >= TV) return;
	const float *d = dout + (i64)r * C;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		const float v = d[c];
		if (dwte) atomicAdd(dwte + (i64)id * C + c, v);
		if (dwpe) atomicAdd(dwpe + (i64)t * C + c, v);
		if (dwtt) atomicAdd(dwtt + (i64)ty * C + c, v);
	}
}

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
