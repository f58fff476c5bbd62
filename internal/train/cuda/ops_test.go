package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	cpu "github.com/anna-search/anna/internal/ops"
	"github.com/anna-search/anna/internal/reftest"
)

// The op suite compares every op with a float64 reference written from the
// Go CPU trainer's code (internal/ops, internal/train/objective, train/optim.go), on fresh
// random inputs, with outputs poisoned (NaN) before each run so that an
// unwritten element fails. It runs twice: on the host emulator of the
// kernels (always; checks the Go side) and on a GPU (when there is one;
// checks the CUDA kernels, within METHOD.md's tolerances: float32 far under
// 1e-3, TF32 near 3e-4, bf16 operands 1e-3…1e-2).

func TestOpsOnEmulator(t *testing.T) {
	d, e := newEmuDevice()
	runSuite(t, d)
	for name := range kernelSigs {
		if e.launches[name] == 0 {
			t.Errorf("kernel %s never launched by the suite", name)
		}
	}
	if e.gemms == 0 {
		t.Error("no matrix product ran")
	}
}

func TestOpsOnGPU(t *testing.T) {
	d := OpenOrSkip(t, Options{Debug: true}, "each kernel's numerics")
	t.Logf("device: %s; kernels: sm_%d CUBIN=%v", d, d.Program.Arch, d.Program.CUBIN)
	runSuite(t, d)
}

// Tolerances on ‖got − want‖ / ‖want‖.
const (
	tolF32  = 2e-6
	tolTF32 = 2e-3
	tolBF16 = 1e-2
)

type fixture struct {
	t   *testing.T
	d   *Device
	rng *rand.Rand
}

func runSuite(t *testing.T, d *Device) {
	seed := uint64(20261121)
	for _, tc := range []struct {
		name string
		f    func(*fixture)
	}{
		{"gemm", testGemm}, {"embedding", testEmbedding}, {"layernorm", testLayerNorm},
		{"activations", testActivations}, {"attention", testAttention}, {"pooling", testPooling},
		{"l2norm", testL2Norm}, {"adamw", testAdamW}, {"reductions", testReductions},
		{"casts", testCasts}, {"bad input", testBadInput}, {"decoder ops", testDecoderOps},
	} {
		seed++
		t.Run(tc.name, func(t *testing.T) {
			tc.f(&fixture{t: t, d: d, rng: rand.New(rand.NewPCG(seed, 7))})
		})
	}
}

func (f *fixture) randn(n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(f.rng.NormFloat64() * scale)
	}
	return x
}

// up copies x to a new device buffer, freed when the test ends.
func (f *fixture) up(x []float32) *Buffer {
	f.t.Helper()
	b, err := f.d.NewF32(x)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { b.Free() })
	return b
}

func (f *fixture) upI(x []int32) *Buffer {
	f.t.Helper()
	b, err := f.d.NewI32(x)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { b.Free() })
	return b
}

// poisoned allocates n float32s filled with NaN.
func (f *fixture) poisoned(n int) *Buffer {
	f.t.Helper()
	b, err := f.d.AllocF32(n)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { b.Free() })
	if err := b.Fill32(0x7fc00000); err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) down(b *Buffer, n int) []float32 {
	f.t.Helper()
	out := make([]float32, n)
	if err := Download(out, b); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) ok(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// close fails when ‖got − want‖/‖want‖ > tol (‖got − want‖ > tol for a
// zero want) or got holds a NaN or Inf.
func (f *fixture) close(what string, got []float32, want []float64, tol float64) {
	f.t.Helper()
	if len(got) != len(want) {
		f.t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	rel, bad := reftest.RelErr(got, want, 0)
	if math.IsInf(rel, 1) && bad < 0 { // a zero reference: the error is absolute
		rel, _ = reftest.RelErr(got, want, 1)
	}
	switch {
	case bad >= 0:
		f.t.Errorf("%s: element %d is %v (unwritten or overflowed)", what, bad, got[bad])
	case !(rel <= tol):
		f.t.Errorf("%s: relative error %.3g > %.1g", what, rel, tol)
	}
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// gemmRef is row-major C = alpha·op(A)·op(B) + beta·C in float64.
func gemmRef(transA, transB bool, m, n, k int, alpha float64, a []float32, lda int, b []float32, ldb int, beta float64, c []float64, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if transA {
					ai = p*lda + i
				}
				if transB {
					bi = j*ldb + p
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
		}
	}
}

func testGemm(f *fixture) {
	m, n, k := 37, 29, 53
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		ar, ac := m, k
		if tr[0] {
			ar, ac = k, m
		}
		br, bc := k, n
		if tr[1] {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+3, bc+1, n+2
		a, b, c := f.randn(ar*lda, 1), f.randn(br*ldb, 1), f.randn(m*ldc, 1)
		want := f64(c)
		gemmRef(tr[0], tr[1], m, n, k, 1.25, a, lda, b, ldb, 0.5, want, ldc)
		cb := f.up(c)
		f.ok(f.d.Gemm(tr[0], tr[1], m, n, k, 1.25, f.up(a), lda, f.up(b), ldb, 0.5, cb, ldc))
		f.close("fp32 gemm "+trName(tr), f.down(cb, len(c)), want, tolF32)

		f.d.Math = MathTF32
		cb = f.up(c)
		f.ok(f.d.Gemm(tr[0], tr[1], m, n, k, 1.25, f.up(a), lda, f.up(b), ldb, 0.5, cb, ldc))
		f.d.Math = MathFP32
		f.close("tf32 gemm "+trName(tr), f.down(cb, len(c)), want, tolTF32)

		a16, b16 := f.bf16(a), f.bf16(b)
		cb = f.up(c)
		f.ok(f.d.GemmBF16(tr[0], tr[1], m, n, k, 1.25, a16, lda, b16, ldb, 0.5, cb, ldc))
		f.close("bf16 gemm "+trName(tr), f.down(cb, len(c)), want, tolBF16)
	}
	// Strided batch with beta = 0 over a NaN-poisoned C: C is not read.
	batch, sa, sb, sc := 3, m*k+5, k*n+7, m*n+3
	a, b := f.randn(batch*sa, 1), f.randn(batch*sb, 1)
	want := make([]float64, batch*sc)
	for i := 0; i < batch; i++ {
		gemmRef(false, false, m, n, k, 1, a[i*sa:], k, b[i*sb:], n, 0, want[i*sc:], n)
	}
	cb := f.poisoned(batch * sc)
	f.ok(f.d.GemmBatched(false, false, m, n, k, 1, f.up(a), k, sa, f.up(b), n, sb, 0, cb, n, sc, batch))
	got := f.down(cb, batch*sc)
	for i := 0; i < batch; i++ {
		f.close("batched gemm", got[i*sc:i*sc+m*n], want[i*sc:i*sc+m*n], tolF32)
	}
}

func trName(tr [2]bool) string {
	s := ""
	for _, t := range tr {
		if t {
			s += "T"
		} else {
			s += "N"
		}
	}
	return s
}

// bf16 uploads x rounded to bfloat16 on the device.
func (f *fixture) bf16(x []float32) *Buffer {
	f.t.Helper()
	out, err := f.d.Alloc(2 * len(x))
	f.ok(err)
	f.t.Cleanup(func() { out.Free() })
	f.ok(f.d.CastToBF16(out, f.up(x), len(x)))
	return out
}

func testEmbedding(f *fixture) {
	N, T, C, V, TV := 3, 5, 40, 11, 2
	ids, types := make([]int32, N*T), make([]int32, N*T)
	for i := range ids {
		ids[i] = int32(f.rng.IntN(V))
		types[i] = int32(f.rng.IntN(TV))
	}
	ids[3] = ids[7] // a shared row: the scatter must add both
	wte, wpe, wtt := f.randn(V*C, 1), f.randn(T*C, 1), f.randn(TV*C, 1)
	want := make([]float64, N*T*C)
	for r := 0; r < N*T; r++ {
		for c := 0; c < C; c++ {
			want[r*C+c] = float64(wte[int(ids[r])*C+c]) + float64(wpe[(r%T)*C+c]) + float64(wtt[int(types[r])*C+c])
		}
	}
	out := f.poisoned(N * T * C)
	di, dt := f.upI(ids), f.upI(types)
	f.ok(f.d.EmbeddingForward(out, di, dt, f.up(wte), f.up(wpe), f.up(wtt), N, T, C, V, TV))
	f.close("embedding forward", f.down(out, N*T*C), want, tolF32)

	dout := f.randn(N*T*C, 1)
	g0, g1, g2 := f.randn(V*C, 1), f.randn(T*C, 1), f.randn(TV*C, 1)
	w0, w1, w2 := f64(g0), f64(g1), f64(g2)
	for r := 0; r < N*T; r++ {
		for c := 0; c < C; c++ {
			v := float64(dout[r*C+c])
			w0[int(ids[r])*C+c] += v
			w1[(r%T)*C+c] += v
			w2[int(types[r])*C+c] += v
		}
	}
	b0, b1 := f.up(g0), f.up(g1)
	f.ok(f.d.EmbeddingBackward(b0, b1, nil, f.up(dout), di, dt, N, T, C, V, TV)) // token types frozen
	f.close("embedding backward dwte", f.down(b0, V*C), w0, tolF32)
	f.close("embedding backward dwpe", f.down(b1, T*C), w1, tolF32)
	b2 := f.up(g2)
	f.ok(f.d.EmbeddingBackward(nil, nil, b2, f.up(dout), di, dt, N, T, C, V, TV))
	f.close("embedding backward dwtt", f.down(b2, TV*C), w2, tolF32)

	// An id out of range poisons its row (NaN) and nothing else.
	bad := append([]int32(nil), ids...)
	bad[2] = int32(V)
	f.ok(f.d.EmbeddingForward(out, f.upI(bad), dt, f.up(wte), f.up(wpe), f.up(wtt), N, T, C, V, TV))
	got := f.down(out, N*T*C)
	if !math.IsNaN(float64(got[2*C])) || math.IsNaN(float64(got[3*C])) {
		f.t.Errorf("out-of-range id: row 2 starts %v (want NaN), row 3 %v", got[2*C], got[3*C])
	}
}

func testLayerNorm(f *fixture) {
	rows, C := 300, 70 // neither a multiple of the 8 rows per block nor of 32
	eps := 1e-12
	x, w, b := f.randn(rows*C, 2), f.randn(C, 1), f.randn(C, 1)
	for i := range x {
		x[i] += 3 // an offset, as residual streams have
	}
	want, wmean, wrstd := make([]float64, rows*C), make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		var s, v float64
		for c := 0; c < C; c++ {
			s += float64(x[r*C+c])
		}
		mu := s / float64(C)
		for c := 0; c < C; c++ {
			v += (float64(x[r*C+c]) - mu) * (float64(x[r*C+c]) - mu)
		}
		rs := 1 / math.Sqrt(v/float64(C)+eps)
		wmean[r], wrstd[r] = mu, rs
		for c := 0; c < C; c++ {
			want[r*C+c] = (float64(x[r*C+c])-mu)*rs*float64(w[c]) + float64(b[c])
		}
	}
	out, mean, rstd := f.poisoned(rows*C), f.poisoned(rows), f.poisoned(rows)
	xb, wb := f.up(x), f.up(w)
	f.ok(f.d.LayerNormForward(out, mean, rstd, xb, wb, f.up(b), rows, C, float32(eps)))
	f.close("layernorm out", f.down(out, rows*C), want, tolF32)
	f.close("layernorm mean", f.down(mean, rows), wmean, tolF32)
	f.close("layernorm rstd", f.down(rstd, rows), wrstd, tolF32)

	dout, din0, dw0, db0 := f.randn(rows*C, 1), f.randn(rows*C, 1), f.randn(C, 1), f.randn(C, 1)
	wdin, wdw, wdb := f64(din0), f64(dw0), f64(db0)
	for r := 0; r < rows; r++ {
		var dm, dn float64
		for c := 0; c < C; c++ {
			xh := (float64(x[r*C+c]) - wmean[r]) * wrstd[r]
			g := float64(w[c]) * float64(dout[r*C+c])
			dm += g
			dn += g * xh
			wdw[c] += xh * float64(dout[r*C+c])
			wdb[c] += float64(dout[r*C+c])
		}
		dm /= float64(C)
		dn /= float64(C)
		for c := 0; c < C; c++ {
			xh := (float64(x[r*C+c]) - wmean[r]) * wrstd[r]
			wdin[r*C+c] += (float64(w[c])*float64(dout[r*C+c]) - dm - xh*dn) * wrstd[r]
		}
	}
	din, dw, db := f.up(din0), f.up(dw0), f.up(db0)
	f.ok(f.d.LayerNormBackward(din, dw, db, f.up(dout), xb, wb, mean, rstd, rows, C))
	f.close("layernorm dinp", f.down(din, rows*C), wdin, 1e-5)
	f.close("layernorm dw", f.down(dw, C), wdw, 1e-5)
	f.close("layernorm db", f.down(db, C), wdb, 1e-5)
}

func testActivations(f *fixture) {
	n := 1000
	x := f.randn(n, 2.5)
	xb := f.up(x)
	for _, act := range []string{"gelu", "gelu_new", "relu"} {
		want, wgrad := make([]float64, n), make([]float64, n)
		g := f.randn(n, 1)
		for i, xv := range x {
			v := float64(xv)
			switch act {
			case "gelu":
				want[i] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
				wgrad[i] = float64(g[i]) * (0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi))
			case "gelu_new":
				u := math.Sqrt(2/math.Pi) * (v + 0.044715*v*v*v)
				th := math.Tanh(u)
				want[i] = 0.5 * v * (1 + th)
				wgrad[i] = float64(g[i]) * (0.5*(1+th) + 0.5*v*(1-th*th)*math.Sqrt(2/math.Pi)*(1+3*0.044715*v*v))
			case "relu":
				want[i] = math.Max(v, 0)
				if v > 0 {
					wgrad[i] = float64(g[i])
				}
			}
		}
		out := f.poisoned(n)
		f.ok(f.d.Activation(act, out, xb, n))
		f.close(act+" forward", f.down(out, n), want, tolF32)
		gb := f.up(g)
		f.ok(f.d.ActivationBackward(act, gb, xb, n))
		f.close(act+" backward", f.down(gb, n), wgrad, tolF32)
	}
	want, wgrad := make([]float64, n), make([]float64, n)
	g := f.randn(n, 1)
	for i, xv := range x {
		want[i] = math.Tanh(float64(xv))
	}
	out := f.poisoned(n)
	f.ok(f.d.Tanh(out, xb, n))
	y := f.down(out, n)
	f.close("tanh", y, want, tolF32)
	for i := range wgrad {
		wgrad[i] = float64(g[i]) * (1 - float64(y[i])*float64(y[i]))
	}
	gb := f.up(g)
	f.ok(f.d.TanhBackward(gb, out, n))
	f.close("tanh backward", f.down(gb, n), wgrad, tolF32)
}

// attnRef is internal/ops.Attention in float64: per (n,h) over the
// first L = lens[n] positions, masked keys at probability 0, padded query
// rows of ctx zero. att is returned in the GPU layout (T×T per (n,h)).
func attnRef(q, k, v, mask []float32, lens []int32, N, T, C, H int) (ctx, att []float64) {
	hs := C / H
	scale := 1 / math.Sqrt(float64(hs))
	ctx, att = make([]float64, N*T*C), make([]float64, N*H*T*T)
	for n := 0; n < N; n++ {
		L := int(lens[n])
		for h := 0; h < H; h++ {
			p := att[(n*H+h)*T*T:]
			for i := 0; i < L; i++ {
				mx := math.Inf(-1)
				s := make([]float64, L)
				for j := 0; j < L; j++ {
					for d := 0; d < hs; d++ {
						s[j] += float64(q[(n*T+i)*C+h*hs+d]) * float64(k[(n*T+j)*C+h*hs+d])
					}
					s[j] *= scale
					if mask[n*T+j] != 0 {
						mx = math.Max(mx, s[j])
					}
				}
				var sum float64
				for j := 0; j < L; j++ {
					if mask[n*T+j] != 0 {
						p[i*T+j] = math.Exp(s[j] - mx)
						sum += p[i*T+j]
					}
				}
				for j := 0; j < L; j++ {
					p[i*T+j] /= sum
					for d := 0; d < hs; d++ {
						ctx[(n*T+i)*C+h*hs+d] += p[i*T+j] * float64(v[(n*T+j)*C+h*hs+d])
					}
				}
			}
		}
	}
	return ctx, att
}

func testAttention(f *fixture) {
	N, T, C, H := 3, 7, 12, 3
	hs := C / H
	mask := []float32{
		1, 1, 1, 1, 1, 1, 1,
		1, 1, 0, 1, 0, 0, 0, // a hole inside, L = 4
		1, 0, 0, 0, 0, 0, 0, // L = 1
	}
	lens := []int32{7, 4, 1}
	q, k, v := f.randn(N*T*C, 1), f.randn(N*T*C, 1), f.randn(N*T*C, 1)
	wctx, watt := attnRef(q, k, v, mask, lens, N, T, C, H)
	ctx, att := f.poisoned(N*T*C), f.poisoned(N*H*T*T)
	qb, kb, vb := f.up(q), f.up(k), f.up(v)
	f.ok(f.d.AttentionForward(ctx, att, qb, kb, vb, f.up(mask), f.upI(lens), N, T, C, H))
	f.close("attention ctx", f.down(ctx, N*T*C), wctx, 1e-5)
	f.close("attention probabilities", f.down(att, N*H*T*T), watt, 1e-5)

	// Backward (internal/ops.Attention.Backward) in float64, adding to
	// random initial gradients; dctx is nonzero on padded rows too, which
	// must not leak into anything.
	dctx := f.randn(N*T*C, 1)
	dq0, dk0, dv0 := f.randn(N*T*C, 1), f.randn(N*T*C, 1), f.randn(N*T*C, 1)
	wdq, wdk, wdv := f64(dq0), f64(dk0), f64(dv0)
	scale := 1 / math.Sqrt(float64(hs))
	for n := 0; n < N; n++ {
		L := int(lens[n])
		for h := 0; h < H; h++ {
			p := watt[(n*H+h)*T*T:]
			at := func(t, d int) int { return (n*T+t)*C + h*hs + d }
			dp := make([]float64, L*L)
			for i := 0; i < L; i++ {
				for j := 0; j < L; j++ {
					for d := 0; d < hs; d++ {
						dp[i*L+j] += float64(dctx[at(i, d)]) * float64(v[at(j, d)])
						wdv[at(j, d)] += p[i*T+j] * float64(dctx[at(i, d)])
					}
				}
				var dot float64
				for j := 0; j < L; j++ {
					dot += p[i*T+j] * dp[i*L+j]
				}
				for j := 0; j < L; j++ {
					dp[i*L+j] = p[i*T+j] * (dp[i*L+j] - dot)
				}
			}
			for i := 0; i < L; i++ {
				for j := 0; j < L; j++ {
					for d := 0; d < hs; d++ {
						wdq[at(i, d)] += scale * dp[i*L+j] * float64(k[at(j, d)])
						wdk[at(j, d)] += scale * dp[i*L+j] * float64(q[at(i, d)])
					}
				}
			}
		}
	}
	dq, dk, dv := f.up(dq0), f.up(dk0), f.up(dv0)
	f.ok(f.d.AttentionBackward(dq, dk, dv, f.up(dctx), att, qb, kb, vb, N, T, C, H))
	f.close("attention dq", f.down(dq, N*T*C), wdq, 1e-5)
	f.close("attention dk", f.down(dk, N*T*C), wdk, 1e-5)
	f.close("attention dv", f.down(dv, N*T*C), wdv, 1e-5)
}

func testPooling(f *fixture) {
	N, T, C := 3, 6, 20
	mask := []float32{
		1, 1, 1, 1, 0, 0,
		1, 0, 1, 0, 0, 0,
		1, 1, 1, 1, 1, 1,
	}
	lens := []int32{4, 3, 6}
	hid := f.randn(N*T*C, 1)
	hb, mb, lb := f.up(hid), f.up(mask), f.upI(lens)
	for _, mode := range []string{"mean", "cls", "lasttoken"} {
		want := make([]float64, N*C)
		dp, dh0 := f.randn(N*C, 1), f.randn(N*T*C, 1)
		wdh := f64(dh0)
		for n := 0; n < N; n++ {
			L := int(lens[n])
			var cnt float64
			for t := 0; t < L; t++ {
				cnt += float64(mask[n*T+t])
			}
			for c := 0; c < C; c++ {
				switch mode {
				case "mean":
					for t := 0; t < L; t++ {
						mk := float64(mask[n*T+t])
						want[n*C+c] += float64(hid[(n*T+t)*C+c]) * mk / cnt
						wdh[(n*T+t)*C+c] += float64(dp[n*C+c]) * mk / cnt
					}
				case "cls":
					want[n*C+c] = float64(hid[n*T*C+c])
					wdh[n*T*C+c] += float64(dp[n*C+c])
				case "lasttoken":
					want[n*C+c] = float64(hid[(n*T+L-1)*C+c])
					wdh[(n*T+L-1)*C+c] += float64(dp[n*C+c])
				}
			}
		}
		out := f.poisoned(N * C)
		f.ok(f.d.Pool(out, hb, mb, lb, N, T, C, mode))
		f.close(mode+" pooling", f.down(out, N*C), want, tolF32)
		dh := f.up(dh0)
		f.ok(f.d.PoolBackward(dh, f.up(dp), mb, lb, N, T, C, mode))
		f.close(mode+" pooling backward", f.down(dh, N*T*C), wdh, tolF32)
	}
}

func testL2Norm(f *fixture) {
	rows, C := 9, 33
	x := f.randn(rows*C, 1)
	for c := 0; c < C; c++ {
		x[4*C+c] = 0 // a zero row: the norm is clamped, the output zero
	}
	want, wn := make([]float64, rows*C), make([]float64, rows)
	for r := 0; r < rows; r++ {
		var s float64
		for c := 0; c < C; c++ {
			s += float64(x[r*C+c]) * float64(x[r*C+c])
		}
		wn[r] = math.Max(math.Sqrt(s), 1e-12)
		for c := 0; c < C; c++ {
			want[r*C+c] = float64(x[r*C+c]) / wn[r]
		}
	}
	out, norms := f.poisoned(rows*C), f.poisoned(rows)
	f.ok(f.d.L2Normalize(out, norms, f.up(x), rows, C))
	xn := f.down(out, rows*C)
	f.close("l2 normalise", xn, want, tolF32)
	f.close("l2 norms", f.down(norms, rows), wn, tolF32)

	g := f.randn(rows*C, 1)
	wdx := make([]float64, rows*C)
	for r := 0; r < rows; r++ {
		if r == 4 {
			continue // 1/1e-12 blows up any rounding difference; checked below
		}
		var proj float64
		for c := 0; c < C; c++ {
			proj += float64(g[r*C+c]) * want[r*C+c]
		}
		for c := 0; c < C; c++ {
			wdx[r*C+c] = (float64(g[r*C+c]) - proj*want[r*C+c]) / wn[r]
		}
	}
	dx := f.poisoned(rows * C)
	f.ok(f.d.L2NormalizeBackward(dx, f.up(g), out, norms, rows, C))
	got := f.down(dx, rows*C)
	zero := got[4*C : 5*C]
	for c := range zero {
		if want := float64(g[4*C+c]) / 1e-12; math.Abs(float64(zero[c])-want) > 1e-5*math.Abs(want) {
			f.t.Errorf("zero row: dx[%d] = %v, want g/1e-12 = %v", c, zero[c], want)
			break
		}
		zero[c] = 0
	}
	f.close("l2 normalise backward", got, wdx, tolF32)
}

func testAdamW(f *fixture) {
	n := 1000
	w := f.randn(n, 1)
	m, v := make([]float32, n), make([]float32, n)
	wb, mb, vb, gb := f.up(w), f.up(m), f.up(v), f.poisoned(n)
	wbf, err := f.d.Alloc(2 * n)
	f.ok(err)
	defer wbf.Free()
	beta1, beta2, eps, wd, lr := 0.9, 0.999, 1e-8, 0.01, 2e-3
	for step := 1; step <= 3; step++ {
		g := f.randn(n, 0.1)
		f.ok(Upload(gb, g))
		noDecay := step == 2 // both branches of the decay
		s := AdamWScalars(beta1, beta2, eps, wd, lr, step, noDecay)
		f.ok(f.d.AdamW(wb, gb, mb, vb, wbf, n, s))
		// train/optim.go's loop, in float32 as there.
		bc1 := 1 - math.Pow(beta1, float64(step))
		bc2 := 1 - math.Pow(beta2, float64(step))
		b1, b2 := float32(beta1), float32(beta2)
		decay := float32(1)
		if !noDecay {
			decay = float32(1 - lr*wd)
		}
		for i, gi := range g {
			m[i] = b1*m[i] + (1-b1)*gi
			v[i] = b2*v[i] + (1-b2)*gi*gi
			denom := float32(math.Sqrt(float64(v[i])))*float32(1/math.Sqrt(bc2)) + float32(eps)
			w[i] = w[i]*decay - float32(lr/bc1)*m[i]/denom
		}
	}
	got := f.down(wb, n)
	f.close("adamw weights", got, f64(w), 1e-6)
	f.close("adamw m", f.down(mb, n), f64(m), 1e-6)
	f.close("adamw v", f.down(vb, n), f64(v), 1e-6)
	h := make([]uint16, n)
	f.ok(Download(h, wbf))
	for i := range h {
		if h[i] != f32ToBF16(got[i]) {
			f.t.Errorf("bf16 copy of weight %d: %#04x, want %#04x", i, h[i], f32ToBF16(got[i]))
			break
		}
	}
}

func testReductions(f *fixture) {
	a, b := f.randn(5000, 1), f.randn(77, 3)
	var want float64
	for _, x := range append(append([]float32(nil), a...), b...) {
		want += float64(x) * float64(x)
	}
	got, err := f.d.SumSquares(f.up(a), f.up(b))
	f.ok(err)
	if math.Abs(got-want) > 1e-5*want {
		f.t.Errorf("sum of squares %v, want %v", got, want)
	}

	rows, cols := 300, 45
	x, d0 := f.randn(rows*cols, 1), f.randn(cols, 1)
	wd := f64(d0)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			wd[c] += float64(x[r*cols+c])
		}
	}
	db, xb := f.up(d0), f.up(x)
	f.ok(f.d.ColSumAdd(db, xb, rows, cols))
	f.close("column sums", f.down(db, cols), wd, 1e-5)

	bias := f.randn(cols, 1)
	wb := f64(x)
	for i := range wb {
		wb[i] += float64(bias[i%cols])
	}
	f.ok(f.d.BiasAdd(xb, f.up(bias), rows, cols))
	f.close("bias add", f.down(xb, rows*cols), wb, tolF32)

	y := f.randn(rows*cols, 1)
	for i := range wb {
		wb[i] = 0.5 * (wb[i] + float64(y[i]))
	}
	f.ok(f.d.AddInPlace(xb, f.up(y), rows*cols))
	f.ok(f.d.Scale(xb, 0.5, rows*cols))
	f.close("add and scale", f.down(xb, rows*cols), wb, tolF32)
}

func testCasts(f *fixture) {
	bits := []uint32{
		0x3f800000,             // 1
		0x3f808000,             // 1 + 2⁻⁸: a tie, to even (down)
		0x3f818000,             // a tie, to even (up)
		0x3f80c000,             // above the tie: up
		0xbf7fffff,             // rounds up into the next binade
		0x7f7fffff,             // max float: rounds to +Inf
		0x7f800000, 0xff800000, // ±Inf
		0x7fc00001, 0x7f800001, // NaNs stay NaN
		0x00000001, // smallest subnormal: to 0
	}
	x := make([]float32, len(bits))
	for i, b := range bits {
		x[i] = math.Float32frombits(b)
	}
	x = append(x, f.randn(100, 10)...)
	h, err := f.d.Alloc(2 * len(x))
	f.ok(err)
	defer h.Free()
	f.ok(f.d.CastToBF16(h, f.up(x), len(x)))
	got := make([]uint16, len(x))
	f.ok(Download(got, h))
	wantBits := []uint16{0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xbf80, 0x7f80, 0x7f80, 0xff80}
	for i, w := range wantBits {
		if got[i] != w {
			f.t.Errorf("bf16(%#08x) = %#04x, want %#04x", bits[i], got[i], w)
		}
	}
	for i := len(wantBits); i < len(wantBits)+2; i++ {
		if got[i]&0x7f80 != 0x7f80 || got[i]&0x7f == 0 {
			f.t.Errorf("bf16(NaN %#08x) = %#04x, not a NaN", bits[i], got[i])
		}
	}
	if got[len(bits)-1] != 0 {
		f.t.Errorf("bf16(smallest subnormal) = %#04x, want 0", got[len(bits)-1])
	}
	for i := len(bits); i < len(x); i++ {
		if r := float64(bf16ToF32(got[i])); math.Abs(r-float64(x[i])) > math.Abs(float64(x[i]))/256 {
			f.t.Errorf("bf16(%v) = %v: off by more than half an ulp", x[i], r)
			break
		}
	}
	back := f.poisoned(len(x))
	f.ok(f.d.CastFromBF16(back, h, len(x)))
	wide := f.down(back, len(x))
	for i := range x {
		if math.Float32bits(wide[i]) != uint32(got[i])<<16 {
			f.t.Errorf("widening %#04x gave %#08x", got[i], math.Float32bits(wide[i]))
			break
		}
	}
}

// testBadInput: wrong sizes and names are errors naming the op and the
// argument, and queue nothing.
func testBadInput(f *fixture) {
	small, big := f.poisoned(10), f.poisoned(1000)
	for _, c := range []struct {
		err  error
		want string
	}{
		{f.d.LayerNormForward(small, nil, nil, big, big, big, 10, 20, 1e-5), "layer norm forward: out holds 10 elements, needs 200"},
		{f.d.Gemm(false, false, 10, 10, 10, 1, small, 10, big, 10, 0, big, 10), "gemm: A needs 100 elements, its buffer holds 10"},
		{f.d.Gemm(false, false, 10, 10, 10, 1, big, 5, big, 10, 0, big, 10), "gemm: A has row stride 5 < 10 columns"},
		{f.d.Activation("swish", big, big, 10), `activation "swish" not supported`},
		{f.d.Pool(big, big, big, big, 2, 3, 4, "max"), `pooling "max" not supported`},
		{f.d.AttentionForward(big, big, big, big, big, big, big, 1, 2, 10, 3), "3 heads do not divide width 10"},
		{f.d.EmbeddingForward(big, big, big, nil, big, big, 2, 3, 4, 5, 2), "embedding forward: wte is nil"},
		{f.d.AdamW(big, big, big, small, nil, 100, AdamWStep{}), "adamw: v holds 10 elements, needs 100"},
		{f.d.BiasAdd(big, big, -1, 3), "bias add: rows = -1 out of range"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			f.t.Errorf("got %v, want an error containing %q", c.err, c.want)
		}
	}
	if _, err := small.View32(8, 4); err == nil {
		f.t.Error("a view past the end of its buffer was allowed")
	}
}

// testDecoderOps checks the decoder's ops against the CPU trainer's own
// (internal/ops, float32): the rows gather, RMSNorm, rotary embeddings, SwiGLU
// and grouped-query attention, causal and bidirectional.
func testDecoderOps(f *fixture) {
	const tol = 1e-5
	V, rows, C := 11, 10, 24
	table := f.randn(V*C, 1)
	ids := make([]int32, rows)
	want := make([]float64, rows*C)
	for r := range ids {
		ids[r] = int32(f.rng.IntN(V))
		for c := 0; c < C; c++ {
			want[r*C+c] = float64(table[int(ids[r])*C+c])
		}
	}
	out := f.poisoned(rows * C)
	f.ok(f.d.GatherRows(out, f.upI(ids), f.up(table), rows, C, V))
	f.close("gather rows", f.down(out, rows*C), want, 0)

	x, w := f.randn(rows*C, 1), f.randn(C, 1)
	cout, crstd := make([]float32, rows*C), make([]float32, rows)
	cpu.RMSNormForward(cout, crstd, x, w, rows, C, 1e-5, 1)
	xb, wb, rstd := f.up(x), f.up(w), f.poisoned(rows)
	out = f.poisoned(rows * C)
	f.ok(f.d.RMSNormForward(out, rstd, xb, wb, rows, C, 1e-5))
	f.close("rms norm", f.down(out, rows*C), f64(cout), tol)
	f.close("rms norm rstd", f.down(rstd, rows), f64(crstd), tol)
	dout, dx0, dw0 := f.randn(rows*C, 1), f.randn(rows*C, 1), f.randn(C, 1)
	cdx, cdw := append([]float32(nil), dx0...), append([]float32(nil), dw0...)
	cpu.RMSNormBackward(cdx, cdw, dout, x, w, crstd, rows, C, 1)
	dx, dw := f.up(dx0), f.up(dw0)
	f.ok(f.d.RMSNormBackward(dx, dw, f.up(dout), xb, wb, rstd, rows, C))
	f.close("rms norm backward", f.down(dx, rows*C), f64(cdx), tol)
	f.close("rms norm gain gradient", f.down(dw, C), f64(cdw), tol)
	// frozen gain (dw nil): dinp only
	cdx = append(cdx[:0], dx0...)
	cpu.RMSNormBackward(cdx, nil, dout, x, w, crstd, rows, C, 1)
	dx = f.up(dx0)
	f.ok(f.d.RMSNormBackward(dx, nil, f.up(dout), xb, wb, rstd, rows, C))
	f.close("rms norm backward, frozen gain", f.down(dx, rows*C), f64(cdx), tol)

	// the gather's backward: rows sharing an id add up; masked rows do not
	dt0, dr := f.randn(V*C, 1), f.randn(rows*C, 1)
	mask := make([]float32, rows)
	wantT := f64(dt0)
	for r := range ids {
		if r%4 == 3 {
			continue
		}
		mask[r] = 1
		for c := 0; c < C; c++ {
			wantT[int(ids[r])*C+c] += float64(dr[r*C+c])
		}
	}
	dt := f.up(dt0)
	f.ok(f.d.ScatterAddRows(dt, f.up(dr), f.upI(ids), f.up(mask), rows, C, V))
	f.close("scatter add rows", f.down(dt, V*C), wantT, tol)

	N, T, heads, D := 2, 5, 3, 8
	rope := cpu.NewRope(T, D, 10000)
	rx := f.randn(N*T*heads*D, 1)
	crx := append([]float32(nil), rx...)
	rope.Forward(crx, N*T, heads, 1)
	rb, cosb, sinb := f.up(rx), f.up(rope.Cos), f.up(rope.Sin)
	f.ok(f.d.Rope(rb, cosb, sinb, N*T, T, heads, D, 1))
	f.close("rope", f.down(rb, len(rx)), f64(crx), tol)
	rope.Backward(crx, N*T, heads, 1)
	f.ok(f.d.Rope(rb, cosb, sinb, N*T, T, heads, D, -1))
	f.close("rope backward", f.down(rb, len(rx)), f64(crx), tol)

	n := 37
	g, u := f.randn(n, 2), f.randn(n, 1)
	cs := make([]float32, n)
	cpu.SwiGLUForward(cs, g, u, 1)
	sb := f.poisoned(n)
	gb, ub := f.up(g), f.up(u)
	f.ok(f.d.SwiGLUForward(sb, gb, ub, n))
	f.close("swiglu", f.down(sb, n), f64(cs), tol)
	sd, dg0, du0 := f.randn(n, 1), f.randn(n, 1), f.randn(n, 1)
	cdg, cdu := append([]float32(nil), dg0...), append([]float32(nil), du0...)
	cpu.SwiGLUBackward(cdg, cdu, sd, g, u, 1)
	dgb, dub := f.up(dg0), f.up(du0)
	f.ok(f.d.SwiGLUBackward(dgb, dub, f.up(sd), gb, ub, n))
	f.close("swiglu dg", f.down(dgb, n), f64(cdg), tol)
	f.close("swiglu du", f.down(dub, n), f64(cdu), tol)

	for _, causal := range []bool{true, false} {
		for _, kv := range []int{2, 4} {
			s := Attn{N: 3, T: 6, H: 4, KV: kv, D: 4, Causal: causal}
			lens := []int{6, 4, 1}
			lens32 := make([]int32, s.N)
			mask := make([]float32, s.N*s.T)
			for i, L := range lens {
				lens32[i] = int32(L)
				for t := 0; t < L; t++ {
					mask[i*s.T+t] = 1
				}
			}
			ca := cpu.Attention{N: s.N, T: s.T, H: s.H, KV: s.KV, D: s.D, Causal: causal}
			NQ, NK := s.N*s.T*s.H*s.D, s.N*s.T*s.KV*s.D
			q, k, v := f.randn(NQ, 1), f.randn(NK, 1), f.randn(NK, 1)
			cctx, catt := make([]float32, NQ), make([]float32, ca.AttSize())
			ca.Forward(cctx, catt, q, k, v, lens, 1)
			ctx, att := f.poisoned(NQ), f.poisoned(s.N*s.H*s.T*s.T)
			qb, kb, vb := f.up(q), f.up(k), f.up(v)
			f.ok(f.d.AttentionGQAForward(ctx, att, qb, kb, vb, f.up(mask), f.upI(lens32), s))
			what := fmt.Sprintf("attention (causal %v, %d kv heads)", causal, kv)
			f.close(what+" ctx", f.down(ctx, NQ), f64(cctx), tol)
			dctx := f.randn(NQ, 1)
			dq0, dk0, dv0 := f.randn(NQ, 1), f.randn(NK, 1), f.randn(NK, 1)
			cdq, cdk, cdv := append([]float32(nil), dq0...), append([]float32(nil), dk0...), append([]float32(nil), dv0...)
			ca.Backward(cdq, cdk, cdv, dctx, catt, q, k, v, lens, 1)
			dq, dk, dv := f.up(dq0), f.up(dk0), f.up(dv0)
			f.ok(f.d.AttentionGQABackward(dq, dk, dv, f.up(dctx), att, qb, kb, vb, s))
			f.close(what+" dq", f.down(dq, NQ), f64(cdq), tol)
			f.close(what+" dk", f.down(dk, NK), f64(cdk), tol)
			f.close(what+" dv", f.down(dv, NK), f64(cdv), tol)
		}
	}
}
