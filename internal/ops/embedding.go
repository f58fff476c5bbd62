package ops

// EmbeddingForward writes BERT's embedding sum into out (N·T rows of C):
// row (n, t) is wte[ids] + wpe[t] + wtt[types], positions numbered 0..T−1.
func EmbeddingForward(out []float32, ids, types []int32, wte, wpe, wtt []float32, N, T, C int) {
	for n := 0; n < N; n++ {
		for t := 0; t < T; t++ {
			r := n*T + t
			o := out[r*C : r*C+C]
			w := wte[int(ids[r])*C:]
			p := wpe[t*C:]
			ty := wtt[int(types[r])*C:]
			for c := range o {
				o[c] = w[c] + p[c] + ty[c]
			}
		}
	}
}

// EmbeddingBackward adds dout's rows into the rows of the three tables'
// gradients that are not nil. It runs on one goroutine: rows share table
// rows, and a fixed order keeps it reproducible.
func EmbeddingBackward(dwte, dwpe, dwtt, dout []float32, ids, types []int32, N, T, C int) {
	for n := 0; n < N; n++ {
		for t := 0; t < T; t++ {
			r := n*T + t
			d := dout[r*C : r*C+C]
			if dwte != nil {
				addRow(dwte[int(ids[r])*C:int(ids[r])*C+C], d)
			}
			if dwpe != nil {
				addRow(dwpe[t*C:t*C+C], d)
			}
			if dwtt != nil {
				addRow(dwtt[int(types[r])*C:int(types[r])*C+C], d)
			}
		}
	}
}

// GatherRows writes table's rows ids[r] (each C wide) into out
// (len(ids)×C): a decoder's token embedding.
func GatherRows(out, table []float32, ids []int32, C int) {
	for r, id := range ids {
		copy(out[r*C:r*C+C], table[int(id)*C:int(id)*C+C])
	}
}

// ScatterAddRows is GatherRows' backward: it adds d's rows (len(ids)×C) to
// dtable's rows ids[r], skipping negative ids (rows that were not table
// rows) and doing nothing when dtable is nil. It runs on one goroutine, in
// row order.
func ScatterAddRows(dtable, d []float32, ids []int32, C int) {
	if dtable == nil {
		return
	}
	for r, id := range ids {
		if id >= 0 {
			addRow(dtable[int(id)*C:int(id)*C+C], d[r*C:r*C+C])
		}
	}
}

// addRow adds src to dst elementwise.
func addRow(dst, src []float32) {
	for c, v := range src {
		dst[c] += v
	}
}
