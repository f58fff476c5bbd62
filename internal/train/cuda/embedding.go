package cuda

import "errors"

// Embeddings (internal/ops/embedding.go): BERT's word + position + token
// type rows and the decoders' row gather, and their backwards;
// kernels/embedding.cu.

// EmbeddingForward: out[n,t] = wte[ids[n,t]] + wpe[t] + wtt[types[n,t]]
// for N sequences of T positions, width C; V and TV are the word and
// token-type vocabulary sizes (an id out of range gives a NaN row).
func (d *Device) EmbeddingForward(out, ids, types, wte, wpe, wtt *Buffer, N, T, C, V, TV int) error {
	const op = "embedding forward"
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C, "V", V, "TV", TV),
		need(op, "out", out, N*T*C), need(op, "ids", ids, N*T), need(op, "types", types, N*T),
		need(op, "wte", wte, V*C), need(op, "wpe", wpe, T*C), need(op, "wtt", wtt, TV*C)); err != nil {
		return err
	}
	return d.launch("embedding_forward", grid1(uint32(N*T)), block1(128), 0,
		ptr(out), ptr(ids), ptr(types), ptr(wte), ptr(wpe), ptr(wtt), i32(N*T), i32(T), i32(C), i32(V), i32(TV))
}

// EmbeddingBackward adds dout into the rows of the tables that are not nil.
func (d *Device) EmbeddingBackward(dwte, dwpe, dwtt, dout, ids, types *Buffer, N, T, C, V, TV int) error {
	const op = "embedding backward"
	if err := errors.Join(dims(op, "N", N, "T", T, "C", C, "V", V, "TV", TV),
		need(op, "dout", dout, N*T*C), need(op, "ids", ids, N*T), need(op, "types", types, N*T),
		needOpt(op, "dwte", dwte, V*C), needOpt(op, "dwpe", dwpe, T*C), needOpt(op, "dwtt", dwtt, TV*C)); err != nil {
		return err
	}
	if dwte == nil && dwpe == nil && dwtt == nil {
		return nil
	}
	return d.launch("embedding_backward", grid1(uint32(N*T)), block1(128), 0,
		ptr(dwte), ptr(dwpe), ptr(dwtt), ptr(dout), ptr(ids), ptr(types), i32(N*T), i32(T), i32(C), i32(V), i32(TV))
}

// GatherRows writes table's rows ids[r] (rows of C, V of them) into out.
func (d *Device) GatherRows(out, ids, table *Buffer, rows, C, V int) error {
	const op = "gather rows"
	if err := errors.Join(dims(op, "rows", rows, "C", C, "V", V), need(op, "out", out, rows*C), need(op, "ids", ids, rows),
		need(op, "table", table, V*C)); err != nil {
		return err
	}
	return d.launch("gather_rows", elementwise(int64(rows)*int64(C)), block1(256), 0,
		ptr(out), ptr(ids), ptr(table), i32(rows), i32(C), i32(V))
}

// ScatterAddRows adds d's rows to dtable's rows ids[r] (rows of C, V of
// them), skipping rows whose mask is zero: GatherRows' backward.
func (d *Device) ScatterAddRows(dtable, dd, ids, mask *Buffer, rows, C, V int) error {
	const op = "scatter add rows"
	if err := errors.Join(dims(op, "rows", rows, "C", C, "V", V), need(op, "dtable", dtable, V*C), need(op, "d", dd, rows*C),
		need(op, "ids", ids, rows), need(op, "mask", mask, rows)); err != nil {
		return err
	}
	return d.launch("scatter_add_rows", elementwise(int64(rows)*int64(C)), block1(256), 0,
		ptr(dtable), ptr(dd), ptr(ids), ptr(mask), i32(rows), i32(C), i32(V))
}
