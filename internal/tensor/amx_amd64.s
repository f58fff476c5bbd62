#include "textflag.h"

// AMX (Advanced Matrix Extensions) int8 kernel and the tile instructions'
// encodings, which Go's assembler does not know: each macro is the bytes
// GNU as 2.44 writes for the instruction in its comment (AT&T order:
// tdpbusd B, A, C is C += A·B, A unsigned bytes, B signed).

#define LDTILECFG_AX      BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00 // ldtilecfg (%rax)
#define TILERELEASE       BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // tilerelease
#define TILEZERO_T0       BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0 // tilezero %tmm0
#define TILEZERO_T1       BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8 // tilezero %tmm1
#define TILEZERO_T2       BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0 // tilezero %tmm2
#define TILEZERO_T3       BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8 // tilezero %tmm3
#define TILELOAD_T4_R10   BYTE $0xc4; BYTE $0xc2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x12 // tileloadd (%r10,%rdx,1),%tmm4
#define TILELOAD_T5_R11   BYTE $0xc4; BYTE $0xc2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x13 // tileloadd (%r11,%rdx,1),%tmm5
#define TILELOAD_T6_DI    BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x07 // tileloadd (%rdi,%rax,1),%tmm6
#define TILELOAD_T7_DI64  BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x7c; BYTE $0x07; BYTE $0x40 // tileloadd 0x40(%rdi,%rax,1),%tmm7
#define TILELOAD_T4_SI    BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x16 // tileloadd (%rsi,%rdx,1),%tmm4
#define TILELOAD_T5_SI    BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x16 // tileloadd (%rsi,%rdx,1),%tmm5
#define TILELOAD_T6_SI    BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x16 // tileloadd (%rsi,%rdx,1),%tmm6
#define TILELOAD_T7_SI    BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x16 // tileloadd (%rsi,%rdx,1),%tmm7
#define TDPBUSD_T0_T4_T6  BYTE $0xc4; BYTE $0xe2; BYTE $0x49; BYTE $0x5e; BYTE $0xc4 // tdpbusd %tmm6,%tmm4,%tmm0
#define TDPBUSD_T1_T4_T7  BYTE $0xc4; BYTE $0xe2; BYTE $0x41; BYTE $0x5e; BYTE $0xcc // tdpbusd %tmm7,%tmm4,%tmm1
#define TDPBUSD_T2_T5_T6  BYTE $0xc4; BYTE $0xe2; BYTE $0x49; BYTE $0x5e; BYTE $0xd5 // tdpbusd %tmm6,%tmm5,%tmm2
#define TDPBUSD_T3_T5_T7  BYTE $0xc4; BYTE $0xe2; BYTE $0x41; BYTE $0x5e; BYTE $0xdd // tdpbusd %tmm7,%tmm5,%tmm3
#define TILESTORE_T0_R9   BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x01 // tilestored %tmm0,(%r9,%rax,1)
#define TILESTORE_T1_R9   BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x4c; BYTE $0x01; BYTE $0x40 // tilestored %tmm1,0x40(%r9,%rax,1)
#define TILESTORE_T2_R9   BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x94; BYTE $0x01; BYTE $0x00; BYTE $0x08; BYTE $0x00; BYTE $0x00 // tilestored %tmm2,0x800(%r9,%rax,1)
#define TILESTORE_T3_R9   BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x9c; BYTE $0x01; BYTE $0x40; BYTE $0x08; BYTE $0x00; BYTE $0x00 // tilestored %tmm3,0x840(%r9,%rax,1)

// func int8AMX(kc int, a *uint8, lda int, b *int8, np int, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32, cfg *byte, tmp *int32, rpi int)
//
// C[0:32, 0:32·np] from A's 32 rows (stride lda bytes, read 64 bytes at a
// time over kc chunks of 64 values of k) and np packed 32-column panels
// of B (per group of 4 values of k, 32 columns of 4 bytes: a chunk of k
// is 16 groups, 2,048 bytes, whose columns 0-15 and 16-31 are two tiles
// of stride 128). Per panel the four 16×16 int32 tiles of C are summed in
// tmm0-3 (A's rows 0-15 and 16-31 in tmm4-5, B's halves in tmm6-7) and
// stored to one of tmp's two 32×32 int32 halves, then turned into float32
// as the VNNI kernel's epilogue does: ((float32(sum − corr) · colScale) ·
// rowScale) + bias, rowScale and bias optional (nil). The epilogue of a
// panel runs during the next panel's tile products, rpi rows after each
// chunk's four TDPBUSD (the tile unit and the vector ports work at once;
// run after its panel, the epilogue took about half of a k = 384
// product's time), the rows left after its k loop, the last panel's at
// the end. cfg is the 64-byte tile configuration (palette 1, tiles 0-7
// of 16 rows of 64 bytes).
//
// Registers: SI A's row 0, DX lda, R10/R11 A's rows 0/16 in the k loop,
// DI B, AX 128 (B's and tmp's tile stride), CX the k loop, R8 the panel's
// byte offset (into corr, colScale, bias and a row of C), R9 the tmp half
// the tiles are stored to; the previous panel's epilogue: R14 its tmp
// row, R15 its C row, R13 its rowScale (0: none), BX its rows left, R12
// the rows this turn, Z16-Z21 its corr, colScale and bias. Locals: 0(SP)
// panels left, 8(SP) tmp's two halves XORed, 16(SP) C's stride in bytes.

// EPI runs the previous panel's epilogue for min(R12, BX) rows.
#define EPI(loop, done, norow, nobias) \
loop: \
	TESTQ BX, BX; \
	JE   done; \
	TESTQ R12, R12; \
	JE   done; \
	VMOVDQU32 (R14), Z0; \
	VMOVDQU32 64(R14), Z1; \
	VPSUBD Z16, Z0, Z0; \
	VPSUBD Z17, Z1, Z1; \
	VCVTDQ2PS Z0, Z0; \
	VCVTDQ2PS Z1, Z1; \
	VMULPS Z18, Z0, Z0; \
	VMULPS Z19, Z1, Z1; \
	TESTQ R13, R13; \
	JE   norow; \
	VBROADCASTSS (R13), Z2; \
	VMULPS Z2, Z0, Z0; \
	VMULPS Z2, Z1, Z1; \
	ADDQ $4, R13; \
norow: \
	CMPQ bias+80(FP), $0; \
	JE   nobias; \
	VADDPS Z20, Z0, Z0; \
	VADDPS Z21, Z1, Z1; \
nobias: \
	VMOVUPS Z0, (R15); \
	VMOVUPS Z1, 64(R15); \
	ADDQ $128, R14; \
	ADDQ 16(SP), R15; \
	DECQ BX; \
	DECQ R12; \
	JMP  loop; \
done:

TEXT ·int8AMX(SB), NOSPLIT, $24-112
	MOVQ cfg+88(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), DX
	MOVQ b+24(FP), DI
	MOVQ np+32(FP), R12
	MOVQ R12, 0(SP)
	MOVQ tmp+96(FP), R9
	LEAQ 4096(R9), AX
	XORQ R9, AX
	MOVQ AX, 8(SP)           // tmp ^ (tmp + 4096): XORed into R9 switches halves
	MOVQ ldc+48(FP), AX
	SHLQ $2, AX
	MOVQ AX, 16(SP)
	XORQ R8, R8
	XORQ BX, BX              // no previous panel yet
	XORQ R13, R13
panelamx:
	TILEZERO_T0
	TILEZERO_T1
	TILEZERO_T2
	TILEZERO_T3
	MOVQ SI, R10
	LEAQ (SI)(DX*8), R11
	LEAQ (R11)(DX*8), R11    // A's row 16
	MOVQ $128, AX
	MOVQ kc+0(FP), CX
kloopamx:
	TILELOAD_T4_R10
	TILELOAD_T5_R11
	TILELOAD_T6_DI
	TILELOAD_T7_DI64
	TDPBUSD_T0_T4_T6
	TDPBUSD_T1_T4_T7
	TDPBUSD_T2_T5_T6
	TDPBUSD_T3_T5_T7
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $2048, DI
	MOVQ rpi+104(FP), R12
	EPI(epik, epikdone, epiknorow, epiknobias)
	DECQ CX
	JNE kloopamx
	MOVQ $32, R12            // the previous panel's rows left
	EPI(epir, epirdone, epirnorow, epirnobias)
	TILESTORE_T0_R9
	TILESTORE_T1_R9
	TILESTORE_T2_R9
	TILESTORE_T3_R9
	// This panel's epilogue comes next: its tmp half, C's columns, and
	// its corr, colScale and bias in Z16-Z21.
	MOVQ R9, R14
	MOVQ c+40(FP), R15
	ADDQ R8, R15
	MOVQ rowScale+72(FP), R13
	MOVQ $32, BX
	MOVQ corr+56(FP), R10
	VMOVDQU32 (R10)(R8*1), Z16
	VMOVDQU32 64(R10)(R8*1), Z17
	MOVQ colScale+64(FP), R10
	VMOVUPS (R10)(R8*1), Z18
	VMOVUPS 64(R10)(R8*1), Z19
	MOVQ bias+80(FP), R10
	TESTQ R10, R10
	JE nobiasload
	VMOVUPS (R10)(R8*1), Z20
	VMOVUPS 64(R10)(R8*1), Z21
nobiasload:
	XORQ 8(SP), R9           // the other half for the next panel's tiles
	ADDQ $128, R8
	DECQ 0(SP)
	JNE panelamx
	MOVQ $32, R12            // the last panel's epilogue
	EPI(epil, epildone, epilnorow, epilnobias)
	TILERELEASE
	VZEROUPPER
	RET

// func peakAMX(n int, cfg *byte, buf *byte)
// n rounds of four independent TDPBUSD (16×16×64 multiply-adds each) on
// tiles loaded once from buf (1,024 bytes, stride 64).
TEXT ·peakAMX(SB), NOSPLIT, $0-24
	MOVQ cfg+8(FP), AX
	LDTILECFG_AX
	MOVQ buf+16(FP), SI
	MOVQ $64, DX
	TILELOAD_T4_SI
	TILELOAD_T5_SI
	TILELOAD_T6_SI
	TILELOAD_T7_SI
	TILEZERO_T0
	TILEZERO_T1
	TILEZERO_T2
	TILEZERO_T3
	MOVQ n+0(FP), CX
loopamxpeak:
	TDPBUSD_T0_T4_T6
	TDPBUSD_T1_T4_T7
	TDPBUSD_T2_T5_T6
	TDPBUSD_T3_T5_T7
	DECQ CX
	JNE loopamxpeak
	TILERELEASE
	RET
