// HMAX leaves in the low lane of x the largest of z's sixteen floats (y
// and x are z's lower halves); it clobbers Z0. Included by
// infer_int8_avx512_amd64.s and softmax_avx512_amd64.s.
#define HMAX(z, y, x) \
	VEXTRACTF32X8 $1, z, Y0; \
	VMAXPS Y0, y, y; \
	VEXTRACTF128 $1, y, X0; \
	VMAXPS X0, x, x; \
	VPERMILPS $0x4e, x, X0; \
	VMAXPS X0, x, x; \
	VPERMILPS $0xb1, x, X0; \
	VMAXPS X0, x, x
