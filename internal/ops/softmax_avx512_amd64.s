#include "textflag.h"
#include "infer_consts_amd64.h"
#include "hmax_amd64.h"

// softmaxRow512 (softmax_avx512_amd64.go): attention's softmax numerator
// in AVX-512 F, sixteen floats at a time, the last n%16 under a mask (no
// scalar tail), in base 2 as ExpScaled says. Each element's value is
// scaleBiasMaxAVX2's and expSubSumAVX2's (infer_amd64.s) bit for bit; only
// the sum is added in another order. c points at inferTable. In EXP16:
// y = t − max, k = round(y), r = y − k (exact), p = (((((c6·r + c5)·r +
// c4)·r + c3)·r + c2)·r + c1)·r + 1, the value p·2^k. The AVX2 kernel
// rounds with VROUNDPS, clamps y at −126 and builds 2^k in the exponent's
// bits; here k is rounded by adding and taking away 1.5·2^23 (the same
// integer: ties to even, for |y| < 2^22; lanes past that are below −126
// and masked) and 2^k applied by VSCALEFPS (the same product, exactly
// rounded, for k ≥ −126): single-cycle operations on either port instead
// of VRNDSCALEPS, the conversion, the shift and the add, which crowd the
// one port that runs them.

// EXP16 leaves in Z2 the polynomial of 2^(Z0 − mx) and in Z1 its k (their
// product p·2^k is the value), in K2 the lanes with Z0 − mx ≥ −126 (not
// −Inf, not NaN); mx in Z14, the constants in Z16, Z20..Z26 and Z28
// (below). It clobbers Z0.
#define EXP16 \
	VSUBPS  Z14, Z0, Z0; \
	VCMPPS  $13, Z16, Z0, K2; \
	VADDPS  Z28, Z0, Z1; \
	VSUBPS  Z28, Z1, Z1; \
	VSUBPS  Z1, Z0, Z0; \
	VMOVAPS Z20, Z2; \
	VFMADD213PS Z21, Z0, Z2; \
	VFMADD213PS Z22, Z0, Z2; \
	VFMADD213PS Z23, Z0, Z2; \
	VFMADD213PS Z24, Z0, Z2; \
	VFMADD213PS Z25, Z0, Z2; \
	VFMADD213PS Z26, Z0, Z2

// MAXRED sets Z14 to the largest of Z1's 16 lanes, in every lane.
#define MAXRED \
	HMAX(Z1, Y1, X1); \
	VBROADCASTSS X1, Z14

// EXPSUM sets the n (R10) values at R9 to 2^(x − Z14) (EXP16, 0 below
// −126), the last n%16 under K1, and leaves their sum in X1; c at R8.
#define EXPSUM \
	VBROADCASTSS CM126, Z16; \
	VBROADCASTSS CQ6, Z20; \
	VBROADCASTSS CQ5, Z21; \
	VBROADCASTSS CQ4, Z22; \
	VBROADCASTSS CQ3, Z23; \
	VBROADCASTSS CQ2, Z24; \
	VBROADCASTSS CQ1, Z25; \
	VBROADCASTSS CONE, Z26; \
	VBROADCASTSS CROUND, Z28; \
	VPXORD Z13, Z13, Z13; \
	MOVQ R9, DI; \
	MOVQ R10, CX; \
	SHRQ $4, CX; \
	JZ   exptail; \
	exploop:; \
	VMOVUPS (DI), Z0; \
	EXP16; \
	VSCALEFPS.Z Z1, Z2, K2, Z2; \
	VMOVUPS Z2, (DI); \
	VADDPS  Z2, Z13, Z13; \
	ADDQ $64, DI; \
	DECQ CX; \
	JNZ  exploop; \
	exptail:; \
	KORTESTW K1, K1; \
	JZ   expred; \
	VMOVUPS.Z (DI), K1, Z0; \
	EXP16; \
	KANDW   K1, K2, K2; \
	VSCALEFPS.Z Z1, Z2, K2, Z2; \
	VMOVUPS Z2, K1, (DI); \
	VADDPS  Z2, Z13, Z13; \
	expred:; \
	HREDUCE(VADDPS, Z13, Y13, X13); \
	VMOVAPS X13, X1;

// func softmaxRow512(x, b *float32, n int, s float32, c *[inferConsts][8]float32) float32
// t[i] = x[i]·s + b[i]·log2e (s: ExpScaled's scale·log2e), then x[i] =
// 2^(t[i] − max t) (0 below 2^−126: the masked keys at −Inf); returns
// their sum. n ≥ 1.
TEXT ·softmaxRow512(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), DI
	MOVQ b+8(FP), SI
	MOVQ n+16(FP), R10
	VBROADCASTSS s+24(FP), Z15
	MOVQ c+32(FP), R8
	MOVQ DI, R9
	// K1: the tail's lanes (n%16 of them; none when n%16 = 0)
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VBROADCASTSS CNINF, Z1        // running max, −Inf
	VBROADCASTSS CLOG2E, Z17      // log2e
	MOVQ R10, CX
	SHRQ $4, CX
	JZ   maxtail
maxloop:
	VMULPS  (SI), Z17, Z2         // b·log2e
	VMOVUPS (DI), Z0
	VFMADD213PS Z2, Z15, Z0       // x·s + b·log2e
	VMOVUPS Z0, (DI)
	VMAXPS  Z0, Z1, Z1
	ADDQ $64, DI
	ADDQ $64, SI
	DECQ CX
	JNZ  maxloop
maxtail:
	KORTESTW K1, K1
	JZ   maxred
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z2
	VMULPS  Z17, Z2, Z2
	VFMADD213PS Z2, Z15, Z0
	VMOVUPS Z0, K1, (DI)
	VMAXPS  Z0, Z1, K1, Z1        // lanes past n keep the running max
maxred:
	MAXRED
	EXPSUM
	MOVSS X1, ret+40(FP)
	VZEROUPPER
	RET

// func expRows512(x *float32, ld, n, rows int, m, inv *float32, c *[inferConsts][8]float32)
// softmaxRow512's second half for rows rows of n values, ld floats apart,
// whose first is done: for row r, mx the largest of the 16 lanes at
// m[16r:], then x[i] = 2^(x[i] − mx) (0 below 2^−126) and inv[r] = 1 / their
// sum, added in softmaxRow512's order. n ≥ 1, rows ≥ 1.
TEXT ·expRows512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), R9
	MOVQ ld+8(FP), R11
	SHLQ $2, R11                  // a row in bytes
	MOVQ n+16(FP), R10
	MOVQ rows+24(FP), R12
	MOVQ m+32(FP), R13
	MOVQ inv+40(FP), DX
	MOVQ c+48(FP), R8
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1                  // the tail's lanes (none when n%16 = 0)
	VBROADCASTSS CONE, X15
rowsloop:
	VMOVUPS (R13), Z1
	MAXRED
	EXPSUM
	VDIVSS X1, X15, X1            // 1 / sum
	MOVSS X1, (DX)
	ADDQ R11, R9
	ADDQ $64, R13
	ADDQ $4, DX
	DECQ R12
	JNZ  rowsloop
	VZEROUPPER
	RET

// func scaleRows512(x *float32, ld, n int, f *float32, rows int)
// x[r][i] *= f[r] for rows rows of n values (n a multiple of 16), ld
// floats apart: the softmax's division, on P·V's rows.
TEXT ·scaleRows512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R11
	SHLQ $2, R11
	MOVQ n+16(FP), R10
	SHRQ $4, R10
	MOVQ f+24(FP), DX
	MOVQ rows+32(FP), R12
srrow:
	VBROADCASTSS (DX), Z1
	MOVQ SI, DI
	MOVQ R10, CX
srloop:
	VMULPS (DI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ  srloop
	ADDQ R11, SI
	ADDQ $4, DX
	DECQ R12
	JNZ  srrow
	VZEROUPPER
	RET
