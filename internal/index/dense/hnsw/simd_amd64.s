//go:build !purego

#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ CX, $32
	JL   dot8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  dot32

dot8:
	CMPQ CX, $8
	JL   dotreduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  dot8

dotreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

dottail:
	CMPQ CX, $0
	JE   dotdone
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  dottail

dotdone:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func l2AVX2(a, b *float32, n int) float32
TEXT ·l2AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

l232:
	CMPQ CX, $32
	JL   l28
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VSUBPS (DI), Y4, Y4
	VSUBPS 32(DI), Y5, Y5
	VSUBPS 64(DI), Y6, Y6
	VSUBPS 96(DI), Y7, Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  l232

l28:
	CMPQ CX, $8
	JL   l2reduce
	VMOVUPS (SI), Y4
	VSUBPS (DI), Y4, Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  l28

l2reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

l2tail:
	CMPQ CX, $0
	JE   l2done
	VMOVSS (SI), X1
	VSUBSS (DI), X1, X1
	VFMADD231SS X1, X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  l2tail

l2done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func prefetchLines(p *float32, lines int)
// Issues PREFETCHT0 for `lines` consecutive 64-byte cache lines from p.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ lines+8(FP), CX

pfloop:
	CMPQ CX, $0
	JLE  pfdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	DECQ CX
	JMP  pfloop

pfdone:
	RET

// func dotF32I8AVX2(p *float32, c *int8, n int) float32
// Σ p[i]·float32(c[i]) for n a multiple of 8: each 8 codes are sign-extended
// to int32 (VPMOVSXBD), converted to float (VCVTDQ2PS) and multiply-added.
TEXT ·dotF32I8AVX2(SB), NOSPLIT, $0-28
	MOVQ p+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

qd32:
	CMPQ CX, $32
	JL   qd8
	VPMOVSXBD (DI), Y4
	VPMOVSXBD 8(DI), Y5
	VPMOVSXBD 16(DI), Y6
	VPMOVSXBD 24(DI), Y7
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ $128, SI
	ADDQ $32, DI
	SUBQ $32, CX
	JMP  qd32

qd8:
	CMPQ CX, $8
	JL   qdreduce
	VPMOVSXBD (DI), Y4
	VCVTDQ2PS Y4, Y4
	VFMADD231PS (SI), Y4, Y0
	ADDQ $32, SI
	ADDQ $8, DI
	SUBQ $8, CX
	JMP  qd8

qdreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func prefetchBytes(p *int8, lines int)
TEXT ·prefetchBytes(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ lines+8(FP), CX

pbloop:
	CMPQ CX, $0
	JLE  pbdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	DECQ CX
	JMP  pbloop

pbdone:
	RET

// func prefetchUint32(p *uint32, lines int)
// prefetchBytes' body: the same arguments, a pointer and a count.
TEXT ·prefetchUint32(SB), NOSPLIT, $0-16
	JMP ·prefetchBytes(SB)

// func dotI8Asm(a *uint8, s *int8, c *int8, n int, vnni bool) int32
// Σ s[i]·c[i] over int8 values for n a multiple of 32, given a[i] = |s[i]|:
// VPSIGNB moves s's signs onto the codes; then on AVX2 VPMADDUBSW
// multiplies the unsigned |s| by them and adds pairs into int16 (|s|,
// |c| ≤ 127: at most 2·127² = 32,258, no saturation) and VPMADDWD by ones
// adds pairs into int32, or with vnni (AVX-512 VNNI, EVEX on YMM:
// AVX512VL) VPDPBUSD does both, four products into each int32 lane.
TEXT ·dotI8Asm(SB), NOSPLIT, $0-44
	MOVQ a+0(FP), SI
	MOVQ s+8(FP), R8
	MOVQ c+16(FP), DI
	MOVQ n+24(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVBLZX vnni+32(FP), AX
	TESTL AX, AX
	JNZ   vn64
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15 // int16 ones

i864:
	CMPQ CX, $64
	JL   i832
	VMOVDQU (DI), Y2
	VMOVDQU 32(DI), Y3
	VPSIGNB (R8), Y2, Y2
	VPSIGNB 32(R8), Y3, Y3
	VMOVDQU (SI), Y4
	VMOVDQU 32(SI), Y5
	VPMADDUBSW Y2, Y4, Y4
	VPMADDUBSW Y3, Y5, Y5
	VPMADDWD Y15, Y4, Y4
	VPMADDWD Y15, Y5, Y5
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  i864

i832:
	CMPQ CX, $32
	JL   i8reduce
	VMOVDQU (DI), Y2
	VPSIGNB (R8), Y2, Y2
	VMOVDQU (SI), Y4
	VPMADDUBSW Y2, Y4, Y4
	VPMADDWD Y15, Y4, Y4
	VPADDD Y4, Y0, Y0
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, DI
	SUBQ $32, CX
	JMP  i832

vn64:
	CMPQ CX, $64
	JL   vn32
	VMOVDQU (DI), Y2
	VMOVDQU 32(DI), Y3
	VPSIGNB (R8), Y2, Y2
	VPSIGNB 32(R8), Y3, Y3
	VMOVDQU (SI), Y4
	VMOVDQU 32(SI), Y5
	VPDPBUSD Y2, Y4, Y0
	VPDPBUSD Y3, Y5, Y1
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  vn64

vn32:
	CMPQ CX, $32
	JL   i8reduce
	VMOVDQU (DI), Y2
	VPSIGNB (R8), Y2, Y2
	VMOVDQU (SI), Y4
	VPDPBUSD Y2, Y4, Y0
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, DI
	SUBQ $32, CX
	JMP  vn32

i8reduce:
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VZEROUPPER
	MOVL X0, ret+40(FP)
	RET

