package tensor

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// int8VNNI and int8AVX2 are the int8 micro-kernels in infer_int8_amd64.s
// (see i8kernel): 8×32 tiles in AVX-512 VNNI and 4×16 tiles in AVX2, nt
// tiles down the rows a call.
// int8AMX (amx_amd64.s) is the AMX kernel: 32 rows by np panels of 32
// columns (rowsAMX).
//
//go:noescape
func int8VNNI(kg int, a *uint8, lda int, b *int8, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32, nt int)

//go:noescape
func int8AVX2(kg int, a *uint8, lda int, b *int8, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32, nt int)

//go:noescape
func int8AMX(kc int, a *uint8, lda int, b *int8, np int, c *float32, ldc int, corr *int32, colScale, rowScale, bias *float32, cfg *byte, tmp *int32, rpi int)

// amxTileConfig is int8AMX's tile configuration: palette 1, tiles 0-7
// each 16 rows of 64 bytes (C: 16×16 int32; A: 16 rows × 64 bytes of k;
// B: 16 groups of 4 values of k × 16 columns).
var amxTileConfig = func() (c [64]byte) {
	c[0] = 1
	for t := 0; t < 8; t++ {
		c[16+2*t] = 64 // colsb, little-endian uint16
		c[48+t] = 16   // rows
	}
	return c
}()

// int8Kernels lists the int8 kernels this CPU runs, fastest first; the
// portable one is always last. GODEBUG=cpu.amxint8=off,
// cpu.avx512vnni=off or cpu.avx2=off (golang.org/x/sys/cpu's options)
// leaves a kernel out.
var int8Kernels = sync.OnceValue(func() []*i8kernel {
	var ks []*i8kernel
	avx512 := cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
	if avx512 && cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && amxPermitted() {
		ks = append(ks, &i8kernel{name: "amx", mr: 32, nr: 32, kalign: 64, maxW: 127, amx: true})
	}
	if avx512 && cpu.X86.HasAVX512VNNI {
		ks = append(ks, &i8kernel{name: "avx512vnni", mr: 8, nr: 32, kalign: 4, maxW: 127, asm: int8VNNI})
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, &i8kernel{name: "avx2", mr: 4, nr: 16, kalign: 4, maxW: 64, asm: int8AVX2})
	}
	return append(ks, goInt8Kernel)
})

// rowsAMXTile runs int8AMX on one tile row: 32 rows of A at a (stride
// lda, each readable for kp bytes), np panels of b into c (stride ldc).
func rowsAMXTile(kp int, a []uint8, lda int, b []int8, np int, c []float32, ldc int, corr []int32, cs, rs, bias []float32, tmp []int32) {
	_ = a[31*lda+kp-1]
	_ = b[np*kp*32-1]
	_ = c[31*ldc+np*32-1]
	_, _ = corr[np*32-1], cs[np*32-1]
	_ = tmp[2*32*32-1] // two halves: one panel's sums stored while the previous one's are read
	var rp, bp *float32
	if rs != nil {
		_ = rs[31]
		rp = &rs[0]
	}
	if bias != nil {
		_ = bias[np*32-1]
		bp = &bias[0]
	}
	kc := kp / 64
	rpi := (32 + kc - 1) / kc // the previous panel's epilogue rows after each chunk of k
	int8AMX(kc, &a[0], lda, &b[0], np, &c[0], ldc, &corr[0], &cs[0], rp, bp, &amxTileConfig[0], &tmp[0], rpi)
}
