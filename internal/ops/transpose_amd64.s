#include "textflag.h"

// func transpose16(dst *float32, ldd int, src *float32, lds int, jb, db int)
// (transpose_amd64.go): dst[d][j] = src[j][d] for j < 16·jb, d < 16·db,
// one block of 16×16 at a time: its 16 rows loaded, transposed in the
// registers (unpack pairs of floats, then pairs of pairs, then 128-bit
// lanes twice: 64 shuffles), its 16 columns stored as rows. Strides in
// floats.
TEXT ·transpose16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), BX
	SHLQ $2, BX                // dst's stride in bytes
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), DX
	SHLQ $2, DX                // src's stride in bytes
	MOVQ jb+32(FP), R10
	MOVQ db+40(FP), R11
	MOVQ BX, R15
	SHLQ $2, R15               // 4 rows of dst
	LEAQ (R15)(R15*2), R9      // 12 rows of dst
	TESTQ R10, R10
	JLE  done
	TESTQ R11, R11
	JLE  done
jloop:
	MOVQ SI, R8                // this block row's first source row
	MOVQ DI, R14               // its first destination column
	MOVQ R11, CX
dloop:
	MOVQ R8, R12
	VMOVUPS (R12), Z0
	ADDQ DX, R12
	VMOVUPS (R12), Z1
	ADDQ DX, R12
	VMOVUPS (R12), Z2
	ADDQ DX, R12
	VMOVUPS (R12), Z3
	ADDQ DX, R12
	VMOVUPS (R12), Z4
	ADDQ DX, R12
	VMOVUPS (R12), Z5
	ADDQ DX, R12
	VMOVUPS (R12), Z6
	ADDQ DX, R12
	VMOVUPS (R12), Z7
	ADDQ DX, R12
	VMOVUPS (R12), Z8
	ADDQ DX, R12
	VMOVUPS (R12), Z9
	ADDQ DX, R12
	VMOVUPS (R12), Z10
	ADDQ DX, R12
	VMOVUPS (R12), Z11
	ADDQ DX, R12
	VMOVUPS (R12), Z12
	ADDQ DX, R12
	VMOVUPS (R12), Z13
	ADDQ DX, R12
	VMOVUPS (R12), Z14
	ADDQ DX, R12
	VMOVUPS (R12), Z15

	// pairs of rows, float by float (within each 128-bit lane)
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
	VUNPCKLPS Z15, Z14, Z30
	VUNPCKHPS Z15, Z14, Z31
	// fours of rows: Zc (c = 0..3) of rows 0-3 holds, lane by lane,
	// columns c, c+4, c+8, c+12; Z4..Z7 rows 4-7, Z8..Z11 rows 8-11,
	// Z12..Z15 rows 12-15
	VUNPCKLPD Z18, Z16, Z0
	VUNPCKHPD Z18, Z16, Z1
	VUNPCKLPD Z19, Z17, Z2
	VUNPCKHPD Z19, Z17, Z3
	VUNPCKLPD Z22, Z20, Z4
	VUNPCKHPD Z22, Z20, Z5
	VUNPCKLPD Z23, Z21, Z6
	VUNPCKHPD Z23, Z21, Z7
	VUNPCKLPD Z26, Z24, Z8
	VUNPCKHPD Z26, Z24, Z9
	VUNPCKLPD Z27, Z25, Z10
	VUNPCKHPD Z27, Z25, Z11
	VUNPCKLPD Z30, Z28, Z12
	VUNPCKHPD Z30, Z28, Z13
	VUNPCKLPD Z31, Z29, Z14
	VUNPCKHPD Z31, Z29, Z15

// COLS stores columns c, c+4, c+8, c+12 of the block from the fours a
// (rows 0-3), b (4-7), e (8-11), f (12-15); R13 points at column c.
#define COLS(a, b, e, f) \
	VSHUFF32X4 $0x88, b, a, Z16; \
	VSHUFF32X4 $0xdd, b, a, Z17; \
	VSHUFF32X4 $0x88, f, e, Z18; \
	VSHUFF32X4 $0xdd, f, e, Z19; \
	VSHUFF32X4 $0x88, Z18, Z16, Z20; \
	VSHUFF32X4 $0xdd, Z18, Z16, Z21; \
	VSHUFF32X4 $0x88, Z19, Z17, Z22; \
	VSHUFF32X4 $0xdd, Z19, Z17, Z23; \
	VMOVUPS Z20, (R13); \
	VMOVUPS Z22, (R13)(R15*1); \
	VMOVUPS Z21, (R13)(R15*2); \
	VMOVUPS Z23, (R13)(R9*1)

	MOVQ R14, R13
	COLS(Z0, Z4, Z8, Z12)
	ADDQ BX, R13
	COLS(Z1, Z5, Z9, Z13)
	ADDQ BX, R13
	COLS(Z2, Z6, Z10, Z14)
	ADDQ BX, R13
	COLS(Z3, Z7, Z11, Z15)

	ADDQ $64, R8               // the next 16 values of the rows
	LEAQ (R14)(R15*4), R14     // the next 16 rows of dst
	DECQ CX
	JNZ  dloop
	MOVQ DX, AX
	SHLQ $4, AX
	ADDQ AX, SI                // 16 rows down
	ADDQ $64, DI               // 16 columns on
	DECQ R10
	JNZ  jloop
done:
	VZEROUPPER
	RET

// func prefetchRows(p *float32, rows, stride, n int)
// PREFETCHT1 of the cache lines of rows rows of n floats at p, stride
// floats apart: the next level's copy, not the first level's.
TEXT ·prefetchRows(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ rows+8(FP), CX
	MOVQ stride+16(FP), DX
	SHLQ $2, DX
	MOVQ n+24(FP), BX
	SHLQ $2, BX
	TESTQ CX, CX
	JLE pfdone
pfrow:
	XORQ AX, AX
pfline:
	PREFETCHT1 (SI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, BX
	JLT pfline
	ADDQ DX, SI
	DECQ CX
	JNZ pfrow
pfdone:
	RET
