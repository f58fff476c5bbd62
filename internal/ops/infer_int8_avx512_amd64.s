#include "textflag.h"
#include "hmax_amd64.h"

// The int8 forward's element-wise kernels in AVX-512 (infer_int8_avx512_amd64.go),
// sixteen floats at a time; n is a multiple of 16. Each operation is
// rounded as in the Go forms in infer_int8.go (fastGelu's fused
// multiply-adds once, as fma32 does), so all give the same bits. c points at int8Table.

// func fastGelu512(x, b *float32, n int, c *[int8Consts][8]float32) (absMax float32)
// As fastGeluAVX2, and returns the largest |result|.
TEXT ·fastGelu512(SB), NOSPLIT, $0-36
	MOVQ x+0(FP), DI
	MOVQ b+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	VBROADCASTSS 0(R8), Z8     // A
	VBROADCASTSS 32(R8), Z9    // B
	VBROADCASTSS 64(R8), Z10   // ½
	VBROADCASTSS 96(R8), Z11   // 1
	VBROADCASTSS 128(R8), Z12  // −9
	VBROADCASTSS 160(R8), Z13  // 9
	VBROADCASTSS 192(R8), Z14  // a13
	VBROADCASTSS 224(R8), Z15
	VBROADCASTSS 256(R8), Z16
	VBROADCASTSS 288(R8), Z17
	VBROADCASTSS 320(R8), Z18
	VBROADCASTSS 352(R8), Z19
	VBROADCASTSS 384(R8), Z20  // a1
	VBROADCASTSS 416(R8), Z21  // b6
	VBROADCASTSS 448(R8), Z22
	VBROADCASTSS 480(R8), Z23
	VBROADCASTSS 512(R8), Z24  // b0
	VPXORD Z25, Z25, Z25       // max |result|
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z26
	SHRQ $4, CX
	JZ   fg5done
fg5loop:
	VMOVUPS (DI), Z0
	VADDPS  (SI), Z0, Z0       // v
	VMULPS  Z9, Z0, Z1
	VFMADD213PS Z8, Z0, Z1     // (b·v)·v + a
	VMULPS  Z1, Z0, Z1         // u
	VMAXPS  Z12, Z1, Z1
	VMINPS  Z13, Z1, Z1
	VMULPS  Z1, Z1, Z2         // u²
	VMOVAPS Z14, Z3
	VFMADD213PS Z15, Z2, Z3
	VFMADD213PS Z16, Z2, Z3
	VFMADD213PS Z17, Z2, Z3
	VFMADD213PS Z18, Z2, Z3
	VFMADD213PS Z19, Z2, Z3
	VFMADD213PS Z20, Z2, Z3
	VMULPS  Z1, Z3, Z3         // p
	VMOVAPS Z21, Z4
	VFMADD213PS Z22, Z2, Z4
	VFMADD213PS Z23, Z2, Z4
	VFMADD213PS Z24, Z2, Z4    // q
	VDIVPS  Z4, Z3, Z3         // tanh(u)
	VMULPS  Z10, Z0, Z0
	VFMADD213PS Z0, Z0, Z3     // ½v·tanh + ½v
	VMOVUPS Z3, (DI)
	VPANDD  Z26, Z3, Z3
	VMAXPS  Z3, Z25, Z25
	ADDQ $64, DI
	ADDQ $64, SI
	DECQ CX
	JNZ  fg5loop
fg5done:
	VMOVAPS Z25, Z1
	HMAX(Z1, Y1, X1)
	MOVSS X1, absMax+32(FP)
	VZEROUPPER
	RET

// func absMax512(x *float32, n int) float32
TEXT ·absMax512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VPXORD Z1, Z1, Z1
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z2
	SHRQ $4, CX
	JZ   am5done
am5loop:
	VPANDD  (DI), Z2, Z0
	VMAXPS  Z0, Z1, Z1
	ADDQ $64, DI
	DECQ CX
	JNZ  am5loop
am5done:
	HMAX(Z1, Y1, X1)
	MOVSS X1, ret+16(FP)
	VZEROUPPER
	RET

// func quantize512(q *uint8, x *float32, n int, inv float32)
// q = clamp(round(x·inv), −128, 127) + 128, rounding half to even.
TEXT ·quantize512(SB), NOSPLIT, $0-28
	MOVQ q+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS inv+24(FP), Z5
	MOVL $0xc3000000, AX           // −128
	VPBROADCASTD AX, Z7
	MOVL $0x42fe0000, AX           // 127
	VPBROADCASTD AX, Z8
	MOVL $128, AX
	VPBROADCASTD AX, Z9
	SHRQ $4, CX
	JZ   q5done
q5loop:
	VMOVUPS (SI), Z0
	VMULPS  Z5, Z0, Z0
	VMAXPS  Z7, Z0, Z0
	VMINPS  Z8, Z0, Z0
	VCVTPS2DQ Z0, Z0               // round half to even (MXCSR's default)
	VPADDD  Z9, Z0, Z0
	VPMOVDB Z0, X1
	VMOVDQU X1, (DI)
	ADDQ $64, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  q5loop
q5done:
	VZEROUPPER
	RET

// func skipAdd512(y, x, bias *float32, n int)
// y = (y + x) + bias.
TEXT ·skipAdd512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ bias+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   sa5done
sa5loop:
	VMOVUPS (DI), Z0
	VADDPS  (SI), Z0, Z0
	VADDPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  sa5loop
sa5done:
	VZEROUPPER
	RET

// func rowSums512(y *float32, n, stride int, mask uint16, sums *[32]float32)
// For the rows of y (stride floats apart) whose bit is set in mask (at most
// 16), Σ y and Σ float32(y·y) over n values, each row's summed in order
// in float32 in its own lane (a column of the rows gathered at a time):
// sums[0:16] and sums[16:32].
TEXT ·rowSums512(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ stride+16(FP), AX
	MOVWLZX mask+24(FP), DX
	KMOVW DX, K2
	// Z1: row r's offset r·stride, in floats.
	MOVL $0, DX
	VPXORD Z1, Z1, Z1
	MOVQ $0x0706050403020100, R8
	VMOVQ R8, X3
	VPMOVZXBD X3, Y3               // 0..7
	MOVQ $0x0f0e0d0c0b0a0908, R8
	VMOVQ R8, X4
	VPMOVZXBD X4, Y4               // 8..15
	VINSERTI32X8 $1, Y4, Z3, Z3    // 0..15
	VPBROADCASTD AX, Z5
	VPMULLD Z5, Z3, Z1
	VPXORD Z6, Z6, Z6              // Σ y
	VPXORD Z7, Z7, Z7              // Σ y²
	TESTQ CX, CX
	JZ   rs5done
rs5loop:
	KMOVW K2, K1
	VPXORD Z0, Z0, Z0
	VGATHERDPS (SI)(Z1*4), K1, Z0
	VADDPS Z0, Z6, Z6
	VMULPS Z0, Z0, Z0
	VADDPS Z0, Z7, Z7
	ADDQ $4, SI
	DECQ CX
	JNZ  rs5loop
rs5done:
	MOVQ sums+32(FP), DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	VZEROUPPER
	RET

// func rowSumsT512(y *float32, n, stride int, sums *[32]float32)
// rowSums512 for sixteen whole rows and n a multiple of 16: the same sums
// in the same order (each row's in its own lane, a column at a time), the
// columns taken sixteen at a time by loads and a 16×16 transposition in
// registers instead of one gather a column.
TEXT ·rowSumsT512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ stride+16(FP), AX
	SHLQ $2, AX                 // a row in bytes
	LEAQ (AX)(AX*2), BX         // 3 rows
	LEAQ (SI)(AX*4), DI         // row 4
	LEAQ (DI)(AX*4), R8         // row 8
	LEAQ (R8)(AX*4), R9         // row 12
	VPXORD Z30, Z30, Z30        // Σ y
	VPXORD Z31, Z31, Z31        // Σ y²
	SHRQ $4, CX
	JZ   rt5done
rt5loop:
	VMOVUPS (SI), Z0
	VMOVUPS (SI)(AX*1), Z1
	VMOVUPS (SI)(AX*2), Z2
	VMOVUPS (SI)(BX*1), Z3
	VMOVUPS (DI), Z4
	VMOVUPS (DI)(AX*1), Z5
	VMOVUPS (DI)(AX*2), Z6
	VMOVUPS (DI)(BX*1), Z7
	VMOVUPS (R8), Z8
	VMOVUPS (R8)(AX*1), Z9
	VMOVUPS (R8)(AX*2), Z10
	VMOVUPS (R8)(BX*1), Z11
	VMOVUPS (R9), Z12
	VMOVUPS (R9)(AX*1), Z13
	VMOVUPS (R9)(AX*2), Z14
	VMOVUPS (R9)(BX*1), Z15
	VUNPCKLPS Z1, Z0, Z16
	VUNPCKHPS Z1, Z0, Z17
	VUNPCKLPS Z3, Z2, Z18
	VUNPCKHPS Z3, Z2, Z19
	VUNPCKLPS Z5, Z4, Z20
	VUNPCKHPS Z5, Z4, Z21
	VUNPCKLPS Z7, Z6, Z22
	VUNPCKHPS Z7, Z6, Z23
	VUNPCKLPS Z9, Z8, Z24
	VUNPCKHPS Z9, Z8, Z25
	VUNPCKLPS Z11, Z10, Z26
	VUNPCKHPS Z11, Z10, Z27
	VUNPCKLPS Z13, Z12, Z28
	VUNPCKHPS Z13, Z12, Z29
	VUNPCKLPS Z15, Z14, Z0
	VUNPCKHPS Z15, Z14, Z1
	VUNPCKLPD Z18, Z16, Z2
	VUNPCKHPD Z18, Z16, Z3
	VUNPCKLPD Z19, Z17, Z4
	VUNPCKHPD Z19, Z17, Z5
	VUNPCKLPD Z22, Z20, Z6
	VUNPCKHPD Z22, Z20, Z7
	VUNPCKLPD Z23, Z21, Z8
	VUNPCKHPD Z23, Z21, Z9
	VUNPCKLPD Z26, Z24, Z10
	VUNPCKHPD Z26, Z24, Z11
	VUNPCKLPD Z27, Z25, Z12
	VUNPCKHPD Z27, Z25, Z13
	VUNPCKLPD Z0, Z28, Z14
	VUNPCKHPD Z0, Z28, Z15
	VUNPCKLPD Z1, Z29, Z16
	VUNPCKHPD Z1, Z29, Z18
	VSHUFF32X4 $0x88, Z6, Z2, Z17
	VSHUFF32X4 $0xdd, Z6, Z2, Z19
	VSHUFF32X4 $0x88, Z7, Z3, Z20
	VSHUFF32X4 $0xdd, Z7, Z3, Z22
	VSHUFF32X4 $0x88, Z8, Z4, Z21
	VSHUFF32X4 $0xdd, Z8, Z4, Z23
	VSHUFF32X4 $0x88, Z9, Z5, Z24
	VSHUFF32X4 $0xdd, Z9, Z5, Z26
	VSHUFF32X4 $0x88, Z14, Z10, Z25
	VSHUFF32X4 $0xdd, Z14, Z10, Z27
	VSHUFF32X4 $0x88, Z15, Z11, Z28
	VSHUFF32X4 $0xdd, Z15, Z11, Z0
	VSHUFF32X4 $0x88, Z16, Z12, Z29
	VSHUFF32X4 $0xdd, Z16, Z12, Z1
	VSHUFF32X4 $0x88, Z18, Z13, Z2
	VSHUFF32X4 $0xdd, Z18, Z13, Z6
	VSHUFF32X4 $0x88, Z25, Z17, Z3
	VSHUFF32X4 $0xdd, Z25, Z17, Z7
	VSHUFF32X4 $0x88, Z28, Z20, Z4
	VSHUFF32X4 $0xdd, Z28, Z20, Z8
	VSHUFF32X4 $0x88, Z29, Z21, Z5
	VSHUFF32X4 $0xdd, Z29, Z21, Z9
	VSHUFF32X4 $0x88, Z2, Z24, Z10
	VSHUFF32X4 $0xdd, Z2, Z24, Z14
	VSHUFF32X4 $0x88, Z27, Z19, Z11
	VSHUFF32X4 $0xdd, Z27, Z19, Z15
	VSHUFF32X4 $0x88, Z0, Z22, Z12
	VSHUFF32X4 $0xdd, Z0, Z22, Z16
	VSHUFF32X4 $0x88, Z1, Z23, Z13
	VSHUFF32X4 $0xdd, Z1, Z23, Z18
	VSHUFF32X4 $0x88, Z6, Z26, Z17
	VSHUFF32X4 $0xdd, Z6, Z26, Z25
	VADDPS Z3, Z30, Z30
	VMULPS Z3, Z3, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z4, Z30, Z30
	VMULPS Z4, Z4, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z5, Z30, Z30
	VMULPS Z5, Z5, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z10, Z30, Z30
	VMULPS Z10, Z10, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z11, Z30, Z30
	VMULPS Z11, Z11, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z12, Z30, Z30
	VMULPS Z12, Z12, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z13, Z30, Z30
	VMULPS Z13, Z13, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z17, Z30, Z30
	VMULPS Z17, Z17, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z7, Z30, Z30
	VMULPS Z7, Z7, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z8, Z30, Z30
	VMULPS Z8, Z8, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z9, Z30, Z30
	VMULPS Z9, Z9, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z14, Z30, Z30
	VMULPS Z14, Z14, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z15, Z30, Z30
	VMULPS Z15, Z15, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z16, Z30, Z30
	VMULPS Z16, Z16, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z18, Z30, Z30
	VMULPS Z18, Z18, Z20
	VADDPS Z20, Z31, Z31
	VADDPS Z25, Z30, Z30
	VMULPS Z25, Z25, Z20
	VADDPS Z20, Z31, Z31
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	DECQ CX
	JNZ  rt5loop
rt5done:
	MOVQ sums+24(FP), DI
	VMOVUPS Z30, (DI)
	VMOVUPS Z31, 64(DI)
	VZEROUPPER
	RET


// func norm512(out, y, w, b *float32, n int, mean, sd float32) (absMax float32)
// out = float32(float32((y − mean)/sd)·w) + b; returns the largest |out|.
TEXT ·norm512(SB), NOSPLIT, $0-52
	MOVQ out+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ b+24(FP), R8
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Z5
	VBROADCASTSS sd+44(FP), Z6
	VPXORD Z7, Z7, Z7
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z8
	SHRQ $4, CX
	JZ   n5done
n5loop:
	VMOVUPS (SI), Z0
	VSUBPS  Z5, Z0, Z0
	VDIVPS  Z6, Z0, Z0
	VMULPS  (DX), Z0, Z0
	VADDPS  (R8), Z0, Z0
	VMOVUPS Z0, (DI)
	VPANDD  Z8, Z0, Z0
	VMAXPS  Z0, Z7, Z7
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, R8
	DECQ CX
	JNZ  n5loop
n5done:
	HMAX(Z7, Y7, X7)
	MOVSS X7, absMax+48(FP)
	VZEROUPPER
	RET
