// HREDUCE leaves in the low lane of x z's sixteen floats folded by op
// (VMAXPS, VADDPS): the upper half onto the lower, then the upper 128
// bits, then pairs of pairs, then pairs (y and x are z's lower halves,
// changed in place); it clobbers Z0 and needs AVX-512 F only. Included by
// infer_int8_avx512_amd64.s and softmax_avx512_amd64.s.
#define HREDUCE(op, z, y, x) \
	VEXTRACTF64X4 $1, z, Y0; \
	op Y0, y, y; \
	VEXTRACTF128 $1, y, X0; \
	op X0, x, x; \
	VPERMILPS $0x4e, x, X0; \
	op X0, x, x; \
	VPERMILPS $0xb1, x, X0; \
	op X0, x, x

// HMAX leaves in the low lane of x the largest of z's sixteen floats.
#define HMAX(z, y, x) HREDUCE(VMAXPS, z, y, x)
