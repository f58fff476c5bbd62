#include "textflag.h"

// The int8 forward's element-wise kernels (infer_int8.go), AVX2, eight
// floats at a time; n is a multiple of 8. Each operation is rounded as in
// the Go forms in infer_int8.go (fastGelu's fused multiply-adds once, as
// fma32 does), so both give the same bits. c points at int8Table (infer_int8_amd64.go).
#define QGA 0(R8)
#define QGB 32(R8)
#define QHALF 64(R8)
#define QONE 96(R8)
#define QMNINE 128(R8)
#define QNINE 160(R8)
#define QA13 192(R8)
#define QA11 224(R8)
#define QA9 256(R8)
#define QA7 288(R8)
#define QA5 320(R8)
#define QA3 352(R8)
#define QA1 384(R8)
#define QB6 416(R8)
#define QB4 448(R8)
#define QB2 480(R8)
#define QB0 512(R8)

// QUANT8 is quantizeAVX2's and quantizeMulAVX2's body: q = clamp(x OP s,
// −zp, 255−zp) rounded half to even, + zp, eight values at a time: OP is
// VDIVPS (x/s) or VMULPS (x·s, s the scale's reciprocal).
#define QUANT8(OP, loop, done) \
	MOVQ q+0(FP), DI; \
	MOVQ x+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	VBROADCASTSS s+24(FP), Y5; \
	VBROADCASTSS zp+28(FP), Y6; \
	VXORPS Y7, Y7, Y7; \
	VSUBPS Y6, Y7, Y7; \
	MOVL $0x437f0000, AX; \
	MOVL AX, X8; \
	VBROADCASTSS X8, Y8; \
	VSUBPS Y6, Y8, Y8; \
	VCVTPS2DQ Y6, Y9; \
	SHRQ $3, CX; \
	JZ   done; \
loop: \
	VMOVUPS (SI), Y0; \
	OP      Y5, Y0, Y0; \
	VMAXPS  Y7, Y0, Y0; \
	VMINPS  Y8, Y0, Y0; \
	VCVTPS2DQ Y0, Y0; \
	VPADDD  Y9, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPACKUSDW X1, X0, X0; \
	VPACKUSWB X0, X0, X0; \
	MOVQ X0, (DI); \
	ADDQ $32, SI; \
	ADDQ $8, DI; \
	DECQ CX; \
	JNZ  loop; \
done: \
	VZEROUPPER; \
	RET

// func fastGeluAVX2(x, b *float32, n int, c *[int8Consts][8]float32)
// v = x + b; u = v·((B·v)·v + A); x = (½·v)·tanh(u) + ½·v, tanh the
// rational function of fastTanh (its polynomials by fused multiply-adds).
TEXT ·fastGeluAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	MOVQ b+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	SHRQ $3, CX
	JZ   fgdone
fgloop:
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0           // v
	VMULPS  QGB, Y0, Y1
	VFMADD213PS QGA, Y0, Y1        // (B·v)·v + A
	VMULPS  Y1, Y0, Y1             // u
	VMAXPS  QMNINE, Y1, Y1
	VMINPS  QNINE, Y1, Y1
	VMULPS  Y1, Y1, Y2             // u²
	VMOVUPS QA13, Y3
	VFMADD213PS QA11, Y2, Y3
	VFMADD213PS QA9, Y2, Y3
	VFMADD213PS QA7, Y2, Y3
	VFMADD213PS QA5, Y2, Y3
	VFMADD213PS QA3, Y2, Y3
	VFMADD213PS QA1, Y2, Y3
	VMULPS  Y1, Y3, Y3             // p
	VMOVUPS QB6, Y4
	VFMADD213PS QB4, Y2, Y4
	VFMADD213PS QB2, Y2, Y4
	VFMADD213PS QB0, Y2, Y4        // q
	VDIVPS  Y4, Y3, Y3             // tanh(u)
	VMULPS  QHALF, Y0, Y0          // ½·v
	VFMADD213PS Y0, Y0, Y3         // ½·v·tanh(u) + ½·v
	VMOVUPS Y3, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ  fgloop
fgdone:
	VZEROUPPER
	RET

// func minMaxAVX2(x *float32, n int) (lo, hi float32)
TEXT ·minMaxAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	VMOVUPS (DI), Y0               // n ≥ 8
	VMOVUPS Y0, Y1
mmloop:
	VMOVUPS (DI), Y2
	VMINPS  Y2, Y0, Y0
	VMAXPS  Y2, Y1, Y1
	ADDQ $32, DI
	DECQ CX
	JNZ  mmloop
	VEXTRACTF128 $1, Y0, X2
	VMINPS X2, X0, X0
	VPERMILPS $0x4e, X0, X2
	VMINPS X2, X0, X0
	VPERMILPS $0xb1, X0, X2
	VMINPS X2, X0, X0
	VEXTRACTF128 $1, Y1, X2
	VMAXPS X2, X1, X1
	VPERMILPS $0x4e, X1, X2
	VMAXPS X2, X1, X1
	VPERMILPS $0xb1, X1, X2
	VMAXPS X2, X1, X1
	MOVSS X0, lo+16(FP)
	MOVSS X1, hi+20(FP)
	VZEROUPPER
	RET

// func quantizeAVX2(q *uint8, x *float32, n int, s, zp float32)
// q = clamp(round(x/s), −zp, 255−zp) + zp, rounding half to even (MXCSR's
// default, VCVTPS2DQ).
TEXT ·quantizeAVX2(SB), NOSPLIT, $0-32
	QUANT8(VDIVPS, qloop, qdone)


// func norm8AVX2(out, y, w, b *float32, n int, mean, sd float32) (absMax float32)
// out = float32(float32((y − mean)/sd)·w) + b; returns the largest |out|
// (norm512's, eight at a time).
TEXT ·norm8AVX2(SB), NOSPLIT, $0-52
	MOVQ out+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ b+24(FP), R8
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Y5
	VBROADCASTSS sd+44(FP), Y6
	VXORPS Y7, Y7, Y7
	MOVL $0x7fffffff, AX
	MOVL AX, X8
	VPBROADCASTD X8, Y8
	SHRQ $3, CX
	JZ   n2done
n2loop:
	VMOVUPS (SI), Y0
	VSUBPS  Y5, Y0, Y0
	VDIVPS  Y6, Y0, Y0
	VMULPS  (DX), Y0, Y0
	VADDPS  (R8), Y0, Y0
	VMOVUPS Y0, (DI)
	VANDPS  Y8, Y0, Y0
	VMAXPS  Y0, Y7, Y7
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, R8
	DECQ CX
	JNZ  n2loop
n2done:
	VEXTRACTF128 $1, Y7, X0
	VMAXPS X0, X7, X7
	VPERMILPS $0x4e, X7, X0
	VMAXPS X0, X7, X7
	VPERMILPS $0xb1, X7, X0
	VMAXPS X0, X7, X7
	MOVSS X7, absMax+48(FP)
	VZEROUPPER
	RET

// func skipAdd8AVX2(y, x, bias *float32, n int)
// y = (y + x) + bias.
TEXT ·skipAdd8AVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ bias+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   sa2done
sa2loop:
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  sa2loop
sa2done:
	VZEROUPPER
	RET

// func rowSums8AVX2(y *float32, n, stride, rows int, sums *[16]float32)
// For the first rows (1..8) rows of y (stride floats apart), Σ y and
// Σ float32(y·y) over n values, each row's summed in order in float32 in
// its own lane (a column of the rows gathered at a time): sums[0:8] and
// sums[8:16] (rowSums512's, eight rows at a time).
TEXT ·rowSums8AVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ stride+16(FP), AX
	MOVQ rows+24(FP), DX
	MOVQ $0x0706050403020100, R8
	MOVQ R8, X3
	VPMOVZXBD X3, Y3               // 0..7
	MOVL AX, X5
	VPBROADCASTD X5, Y5
	VPMULLD Y5, Y3, Y1             // row r's offset r·stride, in floats
	MOVL DX, X5
	VPBROADCASTD X5, Y5
	VPCMPGTD Y3, Y5, Y2            // the rows' lanes: r < rows
	VXORPS Y6, Y6, Y6              // Σ y
	VXORPS Y7, Y7, Y7              // Σ y²
	TESTQ CX, CX
	JZ   rs2done
rs2loop:
	VMOVDQU Y2, Y4
	VXORPS Y0, Y0, Y0
	VGATHERDPS Y4, (SI)(Y1*4), Y0
	VADDPS Y0, Y6, Y6
	VMULPS Y0, Y0, Y0
	VADDPS Y0, Y7, Y7
	ADDQ $4, SI
	DECQ CX
	JNZ  rs2loop
rs2done:
	MOVQ sums+32(FP), DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET

// func quantizeMulAVX2(q *uint8, x *float32, n int, s, zp float32)
// q = clamp(round(x·s), −zp, 255−zp) + zp, rounding half to even (s: the
// reciprocal of the scale).
TEXT ·quantizeMulAVX2(SB), NOSPLIT, $0-32
	QUANT8(VMULPS, qmloop, qmdone)

