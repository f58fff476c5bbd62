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
	MOVL $0x80808080, AX           // +128 on a signed byte: its top bit flipped
	VPBROADCASTD AX, Z10
	VMOVDQU32 ·q4perm(SB), Z11
	SHRQ $4, CX
	// 64 values at a time: capped at 127, rounded to int32 (NaN, −Inf
	// and what lies below −2^31 to its lowest value), packed to int16
	// and then int8 with signed saturation (the clamp at −128, after the
	// rounding: the same integers as clamping first), +128, and the
	// packs' lane order (dword 4l+p holds vector p's lane l) undone.
q5x4:
	CMPQ CX, $4
	JLT  q5loop
	VMULPS  (SI), Z5, Z0
	VMULPS  64(SI), Z5, Z1
	VMULPS  128(SI), Z5, Z2
	VMULPS  192(SI), Z5, Z3
	VMINPS  Z0, Z8, Z0             // ≤ 127 (+Inf too; NaN kept: it converts to the lowest int)
	VMINPS  Z1, Z8, Z1
	VMINPS  Z2, Z8, Z2
	VMINPS  Z3, Z8, Z3
	VCVTPS2DQ Z0, Z0
	VCVTPS2DQ Z1, Z1
	VCVTPS2DQ Z2, Z2
	VCVTPS2DQ Z3, Z3
	VPACKSSDW Z1, Z0, Z0
	VPACKSSDW Z3, Z2, Z2
	VPACKSSWB Z2, Z0, Z0
	VPXORD  Z10, Z0, Z0
	VPERMD  Z0, Z11, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ $256, SI
	ADDQ $64, DI
	SUBQ $4, CX
	JMP  q5x4
q5loop:
	TESTQ CX, CX
	JZ   q5done
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
	JMP  q5loop
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

// func colSums512(t *float32, n int, sums *[32]float32)
// Σ v and Σ float32(v·v) over n rows of 16 values at t (row c: column c of
// sixteen rows, transposed by transpose16), added in row order: each
// lane's sums are rowSums512's for its row, bit for bit.
TEXT ·colSums512(SB), NOSPLIT, $0-24
	MOVQ t+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORD Z6, Z6, Z6              // Σ v
	VPXORD Z7, Z7, Z7              // Σ v²
	TESTQ CX, CX
	JZ   cs5done
cs5loop:
	VMOVUPS (SI), Z0
	VADDPS Z0, Z6, Z6
	VMULPS Z0, Z0, Z0
	VADDPS Z0, Z7, Z7
	ADDQ $64, SI
	DECQ CX
	JNZ  cs5loop
cs5done:
	MOVQ sums+16(FP), DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
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

// q4perm is quantize512's VPERMD index: output dword 4p+l from the packs'
// dword 4l+p (vector p's lane l).
DATA ·q4perm+0(SB)/4, $0
DATA ·q4perm+4(SB)/4, $4
DATA ·q4perm+8(SB)/4, $8
DATA ·q4perm+12(SB)/4, $12
DATA ·q4perm+16(SB)/4, $1
DATA ·q4perm+20(SB)/4, $5
DATA ·q4perm+24(SB)/4, $9
DATA ·q4perm+28(SB)/4, $13
DATA ·q4perm+32(SB)/4, $2
DATA ·q4perm+36(SB)/4, $6
DATA ·q4perm+40(SB)/4, $10
DATA ·q4perm+44(SB)/4, $14
DATA ·q4perm+48(SB)/4, $3
DATA ·q4perm+52(SB)/4, $7
DATA ·q4perm+56(SB)/4, $11
DATA ·q4perm+60(SB)/4, $15
GLOBL ·q4perm(SB), RODATA|NOPTR, $64
