#include "textflag.h"

// func expSubAVX2(x *float32, n int, mx float32, c *[expConsts][8]float32)
// x[i] = Exp32(x[i] − mx) for i < n (n a multiple of 8), eight at a time,
// with the scalar code's operations in its order and no FMA, so that each
// value is Exp32's bit for bit. c holds the constants, each eight times:
// −87, 88, log2e, 0.5, ln2 high, ln2 low, the six polynomial
// coefficients, 1, +Inf, and the int32 127.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y15
	MOVQ c+24(FP), SI
	SHRQ $3, CX
	JZ   done

loop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0          // x = v − mx
	VMULPS  64(SI), Y0, Y1       // x·log2e
	VADDPS  96(SI), Y1, Y1       // + 0.5
	VROUNDPS $1, Y1, Y1          // k = floor
	VMULPS  128(SI), Y1, Y2      // k·ln2hi
	VSUBPS  Y2, Y0, Y2           // x − k·ln2hi
	VMULPS  160(SI), Y1, Y3      // k·ln2lo
	VSUBPS  Y3, Y2, Y2           // r
	VMOVUPS 192(SI), Y3          // p = c0
	VMULPS  Y2, Y3, Y3
	VADDPS  224(SI), Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  256(SI), Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  288(SI), Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  320(SI), Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  352(SI), Y3, Y3
	VMULPS  Y2, Y3, Y3           // p·r
	VMULPS  Y2, Y3, Y3           // ·r
	VADDPS  Y2, Y3, Y3           // + r
	VADDPS  384(SI), Y3, Y3      // + 1
	VCVTTPS2DQ Y1, Y4            // int32(k)
	VPADDD  448(SI), Y4, Y4      // + 127
	VPSLLD  $23, Y4, Y4          // 2^k's bits
	VMULPS  Y4, Y3, Y3
	VCMPPS  $1, (SI), Y0, Y5     // x < −87 (false for NaN)
	VANDNPS Y3, Y5, Y3           // → 0
	VCMPPS  $0x1e, 32(SI), Y0, Y6 // x > 88 (ordered, quiet)
	VBLENDVPS Y6, 416(SI), Y3, Y3 // → +Inf
	VMOVUPS Y3, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
