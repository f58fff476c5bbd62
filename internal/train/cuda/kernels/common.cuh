// Shared helpers for anna's training kernels. Compiled by NVRTC at run time
// (no CUDA headers: NVRTC's built-ins cover everything used here).
//
// Layout conventions follow the Go CPU trainer (internal/ops): row-major
// float32, activations N·T rows × C columns, attention heads interleaved in
// the C columns (head h owns columns h·hs … h·hs+hs−1).

typedef unsigned short bf16_t;
typedef long long i64;

#define FULL_MASK 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

// block_sum returns the sum of v over the block to every thread. sh holds
// at least 32 floats; blockDim.x must be a multiple of 32.
__device__ float block_sum(float v, float *sh) {
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads(); // sh may still be read from the previous call
	if (lane == 0) sh[w] = v;
	__syncthreads();
	if (w == 0) {
		v = lane < nw ? sh[lane] : 0.f;
		v = warp_sum(v);
		if (lane == 0) sh[0] = v;
	}
	__syncthreads();
	return sh[0];
}

// bf16 by bit manipulation: round to nearest even, NaN kept quiet.
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (bf16_t)(u >> 16);
}

__device__ __forceinline__ float bf16_to_f32(bf16_t h) {
	return __uint_as_float(((unsigned)h) << 16);
}
