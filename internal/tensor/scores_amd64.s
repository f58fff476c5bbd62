#include "textflag.h"
#include "tile512_amd64.h"


// SROW is scores512's epilogue for one row (accumulators lo, hi; its
// maximum's 16 lanes at off(BX)): lo, hi = s·lo + bias, s·hi + bias (Z26
// s, Z24 and Z25 the bias), stored at DX, then the lanes' running maximum.
#define SROW(lo, hi, off) \
	VFMADD213PS Z24, Z26, lo; \
	VFMADD213PS Z25, Z26, hi; \
	VMOVUPS lo, (DX); \
	VMOVUPS hi, 64(DX); \
	VMAXPS hi, lo, Z27; \
	VMAXPS off(BX), Z27, Z27; \
	VMOVUPS Z27, off(BX)

// func scores512(kk int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, bias *float32, s float32, mx *float32, np int)
// infer512's 12×32 tile and k loop (the same sums), then attention's
// first softmax step on it: C = s·(A·B) + bias, one FMA a value (bias:
// 32 values, one a column), and each row's running maximum, 16 lanes a
// row at mx (12 rows), raised to the row's C where larger; np ≥ 1 panels
// of 32 columns side by side in one call.
TEXT ·scores512(SB), NOSPLIT, $0-88
scpanel:
	TILE512
	MOVQ bias+56(FP), AX
	VMOVUPS (AX), Z24
	VMOVUPS 64(AX), Z25
	VBROADCASTSS s+64(FP), Z26
	MOVQ mx+72(FP), BX
	SROW(Z0, Z1, 0)
	ADDQ R13, DX
	SROW(Z2, Z3, 64)
	ADDQ R13, DX
	SROW(Z4, Z5, 128)
	ADDQ R13, DX
	SROW(Z6, Z7, 192)
	ADDQ R13, DX
	SROW(Z8, Z9, 256)
	ADDQ R13, DX
	SROW(Z10, Z11, 320)
	ADDQ R13, DX
	SROW(Z12, Z13, 384)
	ADDQ R13, DX
	SROW(Z14, Z15, 448)
	ADDQ R13, DX
	SROW(Z16, Z17, 512)
	ADDQ R13, DX
	SROW(Z18, Z19, 576)
	ADDQ R13, DX
	SROW(Z20, Z21, 640)
	ADDQ R13, DX
	SROW(Z22, Z23, 704)
	// the next panel of 32 columns (B, C and the bias 32 floats on), np in all
	MOVQ np+80(FP), AX
	DECQ AX
	JLE  scdone
	MOVQ AX, np+80(FP)
	ADDQ $128, b+24(FP)
	ADDQ $128, c+40(FP)
	ADDQ $128, bias+56(FP)
	JMP  scpanel
scdone:
	VZEROUPPER
	RET
