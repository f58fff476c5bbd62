#include "textflag.h"

// Inference-only vector math (AVX2 and FMA), eight floats at a time; n is
// a multiple of 8. c points at inferTable (infer_amd64.go): 32-byte rows
// of one constant eight times, at the offsets infer_consts_amd64.h names.
#include "infer_consts_amd64.h"

// func scaleBiasMaxAVX2(x, b *float32, n int, s float32, c *[inferConsts][8]float32) float32
// x[i] = x[i]·s + b[i]·log2e (ExpScaled's t, s its scale·log2e); returns
// the largest x[i] (−Inf for n = 0).
TEXT ·scaleBiasMaxAVX2(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), DI
	MOVQ b+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y15
	MOVQ c+32(FP), R8
	VMOVUPS CNINF, Y1
	VMOVUPS CLOG2E, Y3
	SHRQ $3, CX
	JZ   maxdone
maxloop:
	VMULPS  (SI), Y3, Y2           // b·log2e
	VMOVUPS (DI), Y0
	VFMADD213PS Y2, Y15, Y0
	VMOVUPS Y0, (DI)
	VMAXPS  Y0, Y1, Y1
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ  maxloop
maxdone:
	VEXTRACTF128 $1, Y1, X2
	VMAXPS X2, X1, X1
	VPERMILPS $0x4e, X1, X2
	VMAXPS X2, X1, X1
	VPERMILPS $0xb1, X1, X2
	VMAXPS X2, X1, X1
	MOVSS X1, ret+40(FP)
	VZEROUPPER
	RET

// func expSubSumAVX2(x *float32, n int, mx float32, c *[inferConsts][8]float32) float32
// x[i] = 2^(x[i]−mx) by exp2Poly's steps with FMA (0 below 2^−126 and for
// NaN: the masked keys at −Inf); returns their sum.
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-36
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y15
	MOVQ c+24(FP), R8
	VXORPS Y14, Y14, Y14
	SHRQ $3, CX
	JZ   expdone
exploop:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0            // y
	VCMPPS  $9, CM126, Y0, Y13     // not y ≥ −126 (−Inf, NaN included)
	VMAXPS  CM126, Y0, Y0
	VROUNDPS $0, Y0, Y1            // k = round(y)
	VSUBPS  Y1, Y0, Y0             // r = y − k, exact
	VMOVUPS CQ6, Y2
	VFMADD213PS CQ5, Y0, Y2
	VFMADD213PS CQ4, Y0, Y2
	VFMADD213PS CQ3, Y0, Y2
	VFMADD213PS CQ2, Y0, Y2
	VFMADD213PS CQ1, Y0, Y2
	VFMADD213PS CONE, Y0, Y2
	VCVTPS2DQ Y1, Y4
	VPADDD  C127, Y4, Y4
	VPSLLD  $23, Y4, Y4            // 2^k
	VMULPS  Y4, Y2, Y2
	VANDNPS Y2, Y13, Y2
	VMOVUPS Y2, (DI)
	VADDPS  Y2, Y14, Y14
	ADDQ $32, DI
	DECQ CX
	JNZ  exploop
expdone:
	VEXTRACTF128 $1, Y14, X2
	VADDPS X2, X14, X1
	VPERMILPS $0x4e, X1, X2
	VADDPS X2, X1, X1
	VPERMILPS $0xb1, X1, X2
	VADDPS X2, X1, X1
	MOVSS X1, ret+32(FP)
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, s float32)
// x[i] ·= s.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y15
	SHRQ $3, CX
	JZ   scaledone
scaleloop:
	VMULPS (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  scaleloop
scaledone:
	VZEROUPPER
	RET

// func geluAVX2(x *float32, n int, c *[inferConsts][8]float32)
// x[i] = ½x(1 + erf(x/√2)), erf as Erf32's rational function.
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ c+16(FP), R8
	SHRQ $3, CX
	JZ   geludone
geluloop:
	VMOVUPS (DI), Y0
	VMULPS  CISQRT2, Y0, Y1
	VMINPS  CFOUR, Y1, Y1
	VMAXPS  CMFOUR, Y1, Y1
	VMULPS  Y1, Y1, Y2             // x²
	VMOVUPS CA0, Y3
	VFMADD213PS CA1, Y2, Y3
	VFMADD213PS CA2, Y2, Y3
	VFMADD213PS CA3, Y2, Y3
	VFMADD213PS CA4, Y2, Y3
	VFMADD213PS CA5, Y2, Y3
	VFMADD213PS CA6, Y2, Y3
	VMULPS  Y1, Y3, Y3             // p
	VMOVUPS CB0, Y4
	VFMADD213PS CB1, Y2, Y4
	VFMADD213PS CB2, Y2, Y4
	VFMADD213PS CB3, Y2, Y4
	VFMADD213PS CB4, Y2, Y4        // q
	VDIVPS  Y4, Y3, Y3             // erf
	VADDPS  CONE, Y3, Y3
	VMULPS  CHALF, Y0, Y0
	VMULPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  geluloop
geludone:
	VZEROUPPER
	RET

// func addSumAVX2(x, res *float32, n int) float64
// res[i] += x[i]; returns Σ res[i], summed in float64.
TEXT ·addSumAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ res+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	SHRQ $3, CX
	JZ   adddone
addloop:
	VMOVUPS (SI), Y0
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD  Y1, Y10, Y10
	VADDPD  Y2, Y11, Y11
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  addloop
adddone:
	VADDPD Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X1
	VADDPD X1, X10, X0
	VPERMILPD $1, X0, X1
	VADDSD X1, X0, X0
	MOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func sqDevSumAVX2(x *float32, n int, mu float32) float64
// returns Σ (x[i]−mu)², each square in float32, summed in float64.
TEXT ·sqDevSumAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS mu+16(FP), Y15
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	SHRQ $3, CX
	JZ   sqdone
sqloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	VMULPS  Y0, Y0, Y0
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD  Y1, Y10, Y10
	VADDPD  Y2, Y11, Y11
	ADDQ $32, SI
	DECQ CX
	JNZ  sqloop
sqdone:
	VADDPD Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X1
	VADDPD X1, X10, X0
	VPERMILPD $1, X0, X1
	VADDSD X1, X0, X0
	MOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func normAVX2(out, x, w, b *float32, n int, mu, rs float32)
// out[i] = (x[i]−mu)·rs·w[i] + b[i].
TEXT ·normAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), R8
	MOVQ b+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS mu+40(FP), Y15
	VBROADCASTSS rs+44(FP), Y14
	SHRQ $3, CX
	JZ   normdone
normloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	VMULPS  Y14, Y0, Y0
	VMULPS  (R8), Y0, Y0
	VADDPS  (R9), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  normloop
normdone:
	VZEROUPPER
	RET
