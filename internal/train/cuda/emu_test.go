package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// emu is a host backend that runs each kernel as the CUDA source in
// kernels/ says it behaves, thread coverage included (a grid too small for
// the problem leaves outputs unwritten, as on a GPU), and cuBLAS's
// column-major products. It lets the op suite run where no GPU is: that
// checks the Go side (sizes, strides, transposes, the order of launches,
// scratch use) and the tests themselves. It does not check the CUDA code:
// only a GPU run of the same suite does.
type emu struct {
	mem      []byte
	used     int
	launches map[string]int
	gemms    int
}

const emuBase = uint64(1) << 40

func newEmuDevice() (*Device, *emu) {
	e := &emu{launches: map[string]int{}}
	return &Device{Name: "host emulator", SMs: 4, be: e}, e
}

func (e *emu) alloc(n int) (uint64, error) {
	n = (n + 255) &^ 255
	p := emuBase + uint64(e.used)
	e.used += n
	if e.used > len(e.mem) {
		m := make([]byte, 2*e.used)
		copy(m, e.mem)
		e.mem = m
	}
	return p, nil
}

func (e *emu) free(uint64) error { return nil }
func (e *emu) sync() error       { return nil }

func (e *emu) bytes(p uint64, n int) []byte {
	if p < emuBase || int(p-emuBase)+n > e.used {
		panic(fmt.Sprintf("access [%#x, +%d) outside the emulated memory", p, n))
	}
	off := int(p - emuBase)
	return e.mem[off : off+n]
}

func (e *emu) f32(p uint64, n int) []float32 {
	if p == 0 {
		return nil
	}
	if n == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&e.bytes(p, 4*n)[0])), n)
}

func (e *emu) i32(p uint64, n int) []int32 {
	if n == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&e.bytes(p, 4*n)[0])), n)
}

func (e *emu) u16(p uint64, n int) []uint16 {
	if p == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&e.bytes(p, 2*n)[0])), n)
}

func (e *emu) htod(dst uint64, src unsafe.Pointer, n int) error {
	copy(e.bytes(dst, n), unsafe.Slice((*byte)(src), n))
	return nil
}

func (e *emu) dtoh(dst unsafe.Pointer, src uint64, n int) error {
	copy(unsafe.Slice((*byte)(dst), n), e.bytes(src, n))
	return nil
}

func (e *emu) dtod(dst, src uint64, n int) error {
	copy(e.bytes(dst, n), e.bytes(src, n))
	return nil
}

func (e *emu) memset32(dst uint64, v uint32, words int) error {
	w := unsafe.Slice((*uint32)(unsafe.Pointer(&e.bytes(dst, 4*words)[0])), words)
	for i := range w {
		w[i] = v
	}
	return nil
}

func tf32(v float32) float32 {
	u := math.Float32bits(v)
	if u&0x7f800000 == 0x7f800000 {
		return v
	}
	u += 0xfff + (u>>13)&1
	return math.Float32frombits(u &^ 0x1fff)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 is kernels/common.cuh's f32_to_bf16.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// gemm is cublasGemm(StridedBatched)Ex: column-major, op N or T.
func (e *emu) gemm(g *gemmArgs) (err error) {
	defer catch(&err, "gemm")
	e.gemms++
	esz := 4
	if g.aType == dtBF16 {
		esz = 2
	}
	read := func(p uint64, idx int64) float32 {
		if esz == 2 {
			return bf16ToF32(e.u16(p+uint64(2*idx), 1)[0])
		}
		v := e.f32(p+uint64(4*idx), 1)[0]
		if g.compute == compute32FTF32 {
			v = tf32(v)
		}
		return v
	}
	for b := 0; b < max(g.batch, 1); b++ {
		for j := 0; j < g.n; j++ {
			for i := 0; i < g.m; i++ {
				var s float64
				for p := 0; p < g.k; p++ {
					ai := int64(i) + int64(p)*int64(g.lda)
					if g.opA == opT {
						ai = int64(p) + int64(i)*int64(g.lda)
					}
					bi := int64(p) + int64(j)*int64(g.ldb)
					if g.opB == opT {
						bi = int64(j) + int64(p)*int64(g.ldb)
					}
					s += float64(read(g.a, ai+int64(b)*g.sa)) * float64(read(g.b, bi+int64(b)*g.sb))
				}
				c := e.f32(g.c+uint64(4*(int64(i)+int64(j)*int64(g.ldc)+int64(b)*g.sc)), 1)
				v := float64(g.alpha) * s
				if g.beta != 0 {
					v += float64(g.beta) * float64(c[0])
				}
				c[0] = float32(v)
			}
		}
	}
	return nil
}

func catch(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("emulated %s: %v", what, r)
	}
}

func warpSum(xs []float32) float32 {
	var s float32
	for _, v := range xs {
		s += v
	}
	return s
}

// launch runs one kernel. Arguments are read positionally as the kernel
// declares them (kernelSigs was checked by Device.launch).
func (e *emu) launch(name string, grid, block [3]uint32, shmem uint32, args []arg) (err error) {
	defer catch(&err, name)
	e.launches[name]++
	P := func(i int) uint64 { return args[i].v }
	I := func(i int) int { return int(int32(uint32(args[i].v))) }
	L := func(i int) int { return int(int64(args[i].v)) }
	F := func(i int) float32 { return math.Float32frombits(uint32(args[i].v)) }
	threads := int(grid[0]) * int(block[0])
	warps := threads / 32
	F32 := e.f32
	switch name {
	case "embedding_forward", "embedding_backward":
		rows, T, C, V, TV := I(6), I(7), I(8), I(9), I(10)
		pi := 1 // where ids sit: (out, ids, types, …) forward, (dwte, dwpe, dwtt, dout, ids, types, …) backward
		if name == "embedding_backward" {
			pi = 4
		}
		ids, types := e.i32(P(pi), rows), e.i32(P(pi+1), rows)
		for r := 0; r < min(rows, int(grid[0])); r++ {
			t, id, ty := r%T, int(ids[r]), int(types[r])
			bad := id < 0 || id >= V || ty < 0 || ty >= TV
			if name == "embedding_forward" {
				o := F32(P(0)+uint64(4*r*C), C)
				for c := range o {
					if bad {
						o[c] = float32(math.NaN())
					} else {
						o[c] = F32(P(3)+uint64(4*(id*C+c)), 1)[0] + F32(P(4)+uint64(4*(t*C+c)), 1)[0] + F32(P(5)+uint64(4*(ty*C+c)), 1)[0]
					}
				}
				continue
			}
			if bad {
				continue
			}
			d := F32(P(3)+uint64(4*r*C), C)
			for c, v := range d {
				for _, tb := range []struct {
					p   uint64
					row int
				}{{P(0), id}, {P(1), t}, {P(2), ty}} {
					if tb.p != 0 {
						F32(tb.p+uint64(4*(tb.row*C+c)), 1)[0] += v
					}
				}
			}
		}
	case "layernorm_forward":
		rows, C, eps := I(6), I(7), F(8)
		for r := 0; r < min(rows, warps); r++ {
			x := F32(P(3)+uint64(4*r*C), C)
			mu := warpSum(x) / float32(C)
			var v float32
			for _, xv := range x {
				v += (xv - mu) * (xv - mu)
			}
			rs := float32(1 / math.Sqrt(float64(v/float32(C)+eps)))
			o, w, b := F32(P(0)+uint64(4*r*C), C), F32(P(4), C), F32(P(5), C)
			for c := range o {
				o[c] = (x[c]-mu)*rs*w[c] + b[c]
			}
			if P(1) != 0 {
				F32(P(1), rows)[r] = mu
			}
			if P(2) != 0 {
				F32(P(2), rows)[r] = rs
			}
		}
	case "layernorm_backward_input":
		rows, C := I(6), I(7)
		w, mean, rstd := F32(P(3), C), F32(P(4), rows), F32(P(5), rows)
		for r := 0; r < min(rows, warps); r++ {
			x, d, di := F32(P(2)+uint64(4*r*C), C), F32(P(1)+uint64(4*r*C), C), F32(P(0)+uint64(4*r*C), C)
			var dm, dnn float32
			for c := range x {
				xh := (x[c] - mean[r]) * rstd[r]
				dm += w[c] * d[c]
				dnn += w[c] * d[c] * xh
			}
			dm /= float32(C)
			dnn /= float32(C)
			for c := range x {
				xh := (x[c] - mean[r]) * rstd[r]
				di[c] += (w[c]*d[c] - dm - xh*dnn) * rstd[r]
			}
		}
	case "layernorm_backward_params_partial", "colsum_partial":
		if block != [3]uint32{32, 8, 1} {
			return fmt.Errorf("%s needs block 32×8, got %v", name, block)
		}
		ln := name == "layernorm_backward_params_partial"
		var rows, C, rpc int
		var x, inp, mean, rstd []float32
		if ln {
			rows, C, rpc = I(6), I(7), I(8)
			x, inp, mean, rstd = F32(P(2), rows*C), F32(P(3), rows*C), F32(P(4), rows), F32(P(5), rows)
		} else {
			rows, C, rpc = I(2), I(3), I(4)
			x = F32(P(1), rows*C)
		}
		for chunk := 0; chunk < int(grid[1]); chunk++ {
			for c := 0; c < min(C, int(grid[0])*32); c++ {
				var aw, ab float32
				for r := chunk * rpc; r < min(rows, chunk*rpc+rpc); r++ {
					d := x[r*C+c]
					if ln {
						var mu float32
						if mean != nil { // nil: RMSNorm's
							mu = mean[r]
						}
						aw += (inp[r*C+c] - mu) * rstd[r] * d
					}
					ab += d
				}
				if ln {
					if P(0) != 0 {
						F32(P(0), (chunk+1)*C)[chunk*C+c] = aw
					}
					if P(1) != 0 {
						F32(P(1), (chunk+1)*C)[chunk*C+c] = ab
					}
				} else {
					F32(P(0), (chunk+1)*C)[chunk*C+c] = ab
				}
			}
		}
	case "colsum_finish":
		chunks, cols := I(2), I(3)
		dst, part := F32(P(0), cols), F32(P(1), chunks*cols)
		for c := 0; c < min(cols, threads); c++ {
			var a float32
			for k := 0; k < chunks; k++ {
				a += part[k*cols+c]
			}
			dst[c] += a
		}
	case "sumsq_partial":
		n := L(2)
		x, part := F32(P(1), n), F32(P(0), int(grid[0]))
		for b := range part {
			part[b] = 0
		}
		for i := 0; i < n; i++ {
			part[(i%threads)/int(block[0])] += x[i] * x[i]
		}
	case "bias_add":
		rows, cols := I(2), I(3)
		out, b := F32(P(0), rows*cols), F32(P(1), cols)
		for i := 0; i < min(rows*cols, threads); i++ {
			out[i] += b[i%cols]
		}
	case "add_inplace":
		n := L(2)
		dst, src := F32(P(0), n), F32(P(1), n)
		for i := 0; i < min(n, threads); i++ {
			dst[i] += src[i]
		}
	case "scale_inplace":
		n := L(2)
		x := F32(P(0), n)
		for i := 0; i < min(n, threads); i++ {
			x[i] *= F(1)
		}
	case "act_forward", "act_backward":
		n, act := L(2), I(3)
		o, x := F32(P(0), n), F32(P(1), n)
		for i := 0; i < min(n, threads); i++ {
			v := float64(x[i])
			if name == "act_forward" {
				switch act {
				case 0:
					o[i] = float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
				case 1:
					o[i] = float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
				default:
					o[i] = float32(math.Max(v, 0))
				}
				continue
			}
			switch act {
			case 0:
				o[i] *= float32(0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi))
			case 1:
				t := math.Tanh(math.Sqrt(2/math.Pi) * (v + 0.044715*v*v*v))
				o[i] *= float32(0.5*(1+t) + 0.5*v*(1-t*t)*math.Sqrt(2/math.Pi)*(1+3*0.044715*v*v))
			default:
				if v <= 0 {
					o[i] = 0
				}
			}
		}
	case "tanh_forward", "tanh_backward":
		n := L(2)
		o, x := F32(P(0), n), F32(P(1), n)
		for i := 0; i < min(n, threads); i++ {
			if name == "tanh_forward" {
				o[i] = float32(math.Tanh(float64(x[i])))
			} else {
				o[i] *= 1 - x[i]*x[i]
			}
		}
	case "cast_f32_bf16":
		n := L(2)
		o, x := e.u16(P(0), n), F32(P(1), n)
		for i := 0; i < min(n, threads); i++ {
			o[i] = f32ToBF16(x[i])
		}
	case "cast_bf16_f32":
		n := L(2)
		o, x := F32(P(0), n), e.u16(P(1), n)
		for i := 0; i < min(n, threads); i++ {
			o[i] = bf16ToF32(x[i])
		}
	case "permute_heads", "unpermute_heads":
		N, T, H, hs := I(2), I(3), I(4), I(5)
		total := N * T * H * hs
		dst, src := F32(P(0), total), F32(P(1), total)
		for i := 0; i < min(total, threads); i++ {
			d := i % hs
			r := i / hs
			if name == "permute_heads" {
				t := r % T
				r /= T
				h, n := r%H, r/H
				dst[i] = src[((n*T+t)*H+h)*hs+d]
				continue
			}
			h := r % H
			r /= H
			t, n := r%T, r/T
			v := src[((n*H+h)*T+t)*hs+d]
			if I(6) != 0 {
				dst[i] += v
			} else {
				dst[i] = v
			}
		}
	case "gather_rows":
		rows, C, V := I(3), I(4), I(5)
		out, ids := F32(P(0), rows*C), e.i32(P(1), rows)
		for i := 0; i < min(rows*C, threads); i++ {
			c, id := i%C, int(ids[i/C])
			if id < 0 || id >= V {
				out[i] = float32(math.NaN())
			} else {
				out[i] = F32(P(2)+uint64(4*(id*C+c)), 1)[0]
			}
		}
	case "scatter_add_rows":
		rows, C, V := I(4), I(5), I(6)
		dt, d, ids, mask := F32(P(0), V*C), F32(P(1), rows*C), e.i32(P(2), rows), F32(P(3), rows)
		for i := 0; i < min(rows*C, threads); i++ {
			if id := int(ids[i/C]); mask[i/C] != 0 && id >= 0 && id < V {
				dt[id*C+i%C] += d[i]
			}
		}
	case "rmsnorm_forward":
		rows, C, eps := I(4), I(5), F(6)
		w, rstd := F32(P(3), C), F32(P(1), rows)
		for r := 0; r < min(rows, warps); r++ {
			x, o := F32(P(2)+uint64(4*r*C), C), F32(P(0)+uint64(4*r*C), C)
			var ss float32
			for _, v := range x {
				ss += v * v
			}
			rs := float32(1 / math.Sqrt(float64(ss/float32(C)+eps)))
			for c := range o {
				o[c] = x[c] * rs * w[c]
			}
			rstd[r] = rs
		}
	case "rmsnorm_backward_input":
		rows, C := I(5), I(6)
		w, rstd := F32(P(3), C), F32(P(4), rows)
		for r := 0; r < min(rows, warps); r++ {
			di, d, x := F32(P(0)+uint64(4*r*C), C), F32(P(1)+uint64(4*r*C), C), F32(P(2)+uint64(4*r*C), C)
			rs := rstd[r]
			var dot float32
			for c := range x {
				dot += w[c] * d[c] * x[c] * rs
			}
			m := dot / float32(C)
			for c := range x {
				di[c] += rs * (w[c]*d[c] - x[c]*rs*m)
			}
		}
	case "rope_apply":
		rows, T, heads, D, sign := I(3), I(4), I(5), I(6), F(7)
		h2 := D / 2
		x, cs, sn := F32(P(0), rows*heads*D), F32(P(1), T*h2), F32(P(2), T*h2)
		for k := 0; k < min(rows*heads*h2, threads); k++ {
			i, rh := k%h2, k/h2
			r, hd := rh/heads, rh%heads
			t := r % T
			p := x[r*heads*D+hd*D:]
			c, s := cs[t*h2+i], sign*sn[t*h2+i]
			a, b := p[i], p[i+h2]
			p[i], p[i+h2] = a*c-b*s, b*c+a*s
		}
	case "swiglu_forward":
		n := L(3)
		out, g, u := F32(P(0), n), F32(P(1), n), F32(P(2), n)
		for i := 0; i < min(n, threads); i++ {
			sg := float32(1 / (1 + math.Exp(-float64(g[i]))))
			out[i] = g[i] * sg * u[i]
		}
	case "swiglu_backward":
		n := L(5)
		dg, du, dout, g, u := F32(P(0), n), F32(P(1), n), F32(P(2), n), F32(P(3), n), F32(P(4), n)
		for i := 0; i < min(n, threads); i++ {
			x, d := g[i], dout[i]
			sg := float32(1 / (1 + math.Exp(-float64(x))))
			du[i] += d * x * sg
			dg[i] += d * u[i] * sg * (1 + x*(1-sg))
		}
	case "repeat_kv", "reduce_kv":
		N, KV, rep, TD := I(2), I(3), I(4), I(5)
		H := KV * rep
		big, small := N*H*TD, N*KV*TD
		if name == "repeat_kv" {
			dst, src := F32(P(0), big), F32(P(1), small)
			for i := 0; i < min(big, threads); i++ {
				td, nh := i%TD, i/TD
				h, n := nh%H, nh/H
				dst[i] = src[(n*KV+h/rep)*TD+td]
			}
			break
		}
		dst, src := F32(P(0), small), F32(P(1), big)
		for i := 0; i < min(small, threads); i++ {
			td, ng := i%TD, i/TD
			g, n := ng%KV, ng/KV
			var sum float32
			for r := 0; r < rep; r++ {
				sum += src[(n*H+g*rep+r)*TD+td]
			}
			dst[i] = sum
		}
	case "attn_softmax_forward":
		N, H, T := I(3), I(4), I(5)
		att, mask, lens := F32(P(0), N*H*T*T), F32(P(1), N*T), e.i32(P(2), N)
		for row := 0; row < min(N*H*T, warps); row++ {
			i, n := row%T, row/T/H
			p, m := att[row*T:row*T+T], mask[n*T:n*T+T]
			if i >= int(lens[n]) {
				clear(p)
				continue
			}
			seen := T
			if I(6) != 0 {
				seen = i + 1
			}
			mx := float32(math.Inf(-1))
			for j := range p[:seen] {
				if m[j] != 0 {
					mx = max(mx, p[j])
				}
			}
			var s float32
			for j := range p {
				if j < seen && m[j] != 0 {
					p[j] = float32(math.Exp(float64(p[j] - mx)))
				} else {
					p[j] = 0
				}
				s += p[j]
			}
			for j := range p {
				if s > 0 {
					p[j] /= s
				} else {
					p[j] = 0
				}
			}
		}
	case "attn_softmax_backward":
		rows, T := L(2), I(3)
		dp, att := F32(P(0), rows*T), F32(P(1), rows*T)
		for row := 0; row < min(rows, warps); row++ {
			p, d := att[row*T:row*T+T], dp[row*T:row*T+T]
			var dot float32
			for j := range p {
				dot += p[j] * d[j]
			}
			for j := range p {
				d[j] = p[j] * (d[j] - dot)
			}
		}
	case "pool_forward", "pool_backward":
		N, T, C, mode := I(4), I(5), I(6), I(7)
		mask, lens := F32(P(2), N*T), e.i32(P(3), N)
		for n := 0; n < min(N, int(grid[0])); n++ {
			Ln := int(lens[n])
			var cnt float32
			for t := 0; t < Ln; t++ {
				cnt += mask[n*T+t]
			}
			cnt = max(cnt, 1e-9)
			if name == "pool_forward" {
				o, hid := F32(P(0)+uint64(4*n*C), C), F32(P(1), N*T*C)
				for c := range o {
					switch mode {
					case 0:
						var a float32
						for t := 0; t < Ln; t++ {
							if mk := mask[n*T+t]; mk != 0 {
								a += hid[(n*T+t)*C+c] * mk
							}
						}
						o[c] = a / cnt
					case 1:
						o[c] = hid[n*T*C+c]
					default:
						o[c] = hid[(n*T+max(Ln-1, 0))*C+c]
					}
				}
				continue
			}
			dh, d := F32(P(0), N*T*C), F32(P(1)+uint64(4*n*C), C)
			for t := 0; t < min(T, int(grid[1])); t++ {
				for c := range d {
					switch {
					case mode == 0 && t < Ln && mask[n*T+t] != 0:
						dh[(n*T+t)*C+c] += d[c] * mask[n*T+t] / cnt
					case mode == 1 && t == 0, mode == 2 && t == Ln-1:
						dh[(n*T+t)*C+c] += d[c]
					}
				}
			}
		}
	case "l2norm_forward":
		rows, C := I(3), I(4)
		for r := 0; r < min(rows, warps); r++ {
			x, o := F32(P(2)+uint64(4*r*C), C), F32(P(0)+uint64(4*r*C), C)
			var s float32
			for _, v := range x {
				s += v * v
			}
			nrm := max(float32(math.Sqrt(float64(s))), 1e-12)
			for c := range o {
				o[c] = x[c] / nrm
			}
			if P(1) != 0 {
				F32(P(1), rows)[r] = nrm
			}
		}
	case "l2norm_backward":
		rows, C := I(4), I(5)
		for r := 0; r < min(rows, warps); r++ {
			dx, g, xn := F32(P(0)+uint64(4*r*C), C), F32(P(1)+uint64(4*r*C), C), F32(P(2)+uint64(4*r*C), C)
			var proj float32
			for c := range g {
				proj += g[c] * xn[c]
			}
			nrm := F32(P(3), rows)[r]
			for c := range dx {
				dx[c] = (g[c] - proj*xn[c]) / nrm
			}
		}
	case "adamw_update":
		n := L(5)
		w, g, m, v, wbf := F32(P(0), n), F32(P(1), n), F32(P(2), n), F32(P(3), n), e.u16(P(4), n)
		b1, b2, eps, decay, step, ibc2 := F(6), F(7), F(8), F(9), F(10), F(11)
		for i := 0; i < min(n, threads); i++ {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			denom := float32(math.Sqrt(float64(v[i])))*ibc2 + eps
			w[i] = w[i]*decay - step*m[i]/denom
			if wbf != nil {
				wbf[i] = f32ToBF16(w[i])
			}
		}
	default:
		return fmt.Errorf("no emulation of kernel %s", name)
	}
	return nil
}
