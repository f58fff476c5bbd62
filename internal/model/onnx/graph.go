package onnx

import (
	"fmt"
	"io"
	"sort"

	pb "github.com/anna-search/anna/internal/model/onnxpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Graph builds one ONNX graph. Nodes are appended in topological order by
// construction: an op can only name values that already exist.
type Graph struct {
	name     string
	nodes    [][]byte
	inits    [][]byte
	inputs   [][]byte
	outputs  [][]byte
	names    map[string]bool
	counter  int
	metadata map[string]string
	// ms is set once a com.microsoft op is added, so the model imports
	// that operator set.
	ms bool
	// err is the first construction mistake (a value defined twice or read
	// before it exists); WriteTo reports it, so builders need not check
	// every call.
	err error
}

// NewGraph starts an empty graph.
func NewGraph(name string) *Graph {
	return &Graph{name: name, names: map[string]bool{}, metadata: map[string]string{}}
}

func (g *Graph) fresh(prefix string) string {
	for {
		g.counter++
		n := fmt.Sprintf("%s_%d", prefix, g.counter)
		if !g.names[n] {
			g.names[n] = true
			return n
		}
	}
}

func (g *Graph) claim(name string) string {
	if g.names[name] && g.err == nil {
		g.err = fmt.Errorf("onnx: value %q defined twice", name)
	}
	g.names[name] = true
	return name
}

// Input declares a graph input.
func (g *Graph) Input(name string, elemType int, dims ...Dim) string {
	g.inputs = append(g.inputs, encodeValueInfo(g.claim(name), elemType, dims))
	return name
}

// Output declares that the existing value name is a graph output.
func (g *Graph) Output(name string, elemType int, dims ...Dim) {
	g.outputs = append(g.outputs, encodeValueInfo(name, elemType, dims))
}

// Metadata adds a key/value to the model's metadata_props.
func (g *Graph) Metadata(k, v string) { g.metadata[k] = v }

// Floats adds a float32 initializer with the given shape (nil dims: scalar).
func (g *Graph) Floats(name string, dims []int64, v []float32) string {
	if name == "" {
		name = g.fresh("const")
	} else {
		g.claim(name)
	}
	g.inits = append(g.inits, encodeTensor(name, Float, dims, floatsRaw(v)))
	return name
}

// Int8s adds an int8 initializer (quantized weights) with the given shape.
func (g *Graph) Int8s(name string, dims []int64, v []int8) string {
	if name == "" {
		name = g.fresh("const")
	} else {
		g.claim(name)
	}
	g.inits = append(g.inits, encodeTensor(name, Int8, dims, int8sRaw(v)))
	return name
}

// Uint8s adds a uint8 initializer (packed 4-bit weights) with the given shape.
func (g *Graph) Uint8s(name string, dims []int64, v []uint8) string {
	if name == "" {
		name = g.fresh("const")
	} else {
		g.claim(name)
	}
	g.inits = append(g.inits, encodeTensor(name, Uint8, dims, append([]byte(nil), v...)))
	return name
}

// Int64s adds an int64 initializer with the given shape (nil dims: scalar).
func (g *Graph) Int64s(name string, dims []int64, v []int64) string {
	if name == "" {
		name = g.fresh("const")
	} else {
		g.claim(name)
	}
	g.inits = append(g.inits, encodeTensor(name, Int64, dims, int64sRaw(v)))
	return name
}

// Scalar is a float32 scalar constant.
func (g *Graph) Scalar(v float32) string { return g.Floats("", nil, []float32{v}) }

// Op appends a node with one output and returns the output's name.
func (g *Graph) Op(op string, inputs []string, attrs ...Attr) string {
	return g.OpN(op, inputs, 1, attrs...)[0]
}

// OpNamed is Op with a chosen output name (for graph outputs).
func (g *Graph) OpNamed(op, output string, inputs []string, attrs ...Attr) string {
	g.claim(output)
	g.node("", op, inputs, []string{output}, attrs)
	return output
}

// MS appends a com.microsoft contrib op (see MSDomain) with one output;
// an empty input name is an omitted optional input.
func (g *Graph) MS(op string, inputs []string, attrs ...Attr) string {
	out := g.fresh(op)
	g.ms = true
	g.node(MSDomain, op, inputs, []string{out}, attrs)
	return out
}

// OpN appends a node with n outputs.
func (g *Graph) OpN(op string, inputs []string, n int, attrs ...Attr) []string {
	outs := make([]string, n)
	for i := range outs {
		outs[i] = g.fresh(op)
	}
	g.node("", op, inputs, outs, attrs)
	return outs
}

func (g *Graph) node(domain, op string, inputs, outputs []string, attrs []Attr) {
	for _, in := range inputs {
		if in != "" && !g.names[in] && g.err == nil {
			g.err = fmt.Errorf("onnx: %s node reads undefined value %q", op, in)
		}
	}
	var b []byte
	for _, in := range inputs {
		b = appendString(b, pb.NodeInput, in)
	}
	for _, out := range outputs {
		b = appendString(b, pb.NodeOutput, out)
	}
	b = appendString(b, pb.NodeName, outputs[0]+"_node")
	b = appendString(b, pb.NodeOpType, op)
	for _, a := range attrs {
		b = appendBytes(b, pb.NodeAttribute, a)
	}
	if domain != "" {
		b = appendString(b, pb.NodeDomain, domain)
	}
	g.nodes = append(g.nodes, b)
}

// field is one length-delimited field of a GraphProto.
type field struct {
	num protowire.Number
	b   []byte
}

// fields is the GraphProto body: nodes, name, initializers, inputs,
// outputs; each a length-delimited field, so its size is known before
// writing.
func (g *Graph) fields() []field {
	var fields []field
	for _, n := range g.nodes {
		fields = append(fields, field{pb.GraphNode, n})
	}
	fields = append(fields, field{pb.GraphName, []byte(g.name)})
	for _, t := range g.inits {
		fields = append(fields, field{pb.GraphInitializer, t})
	}
	for _, v := range g.inputs {
		fields = append(fields, field{pb.GraphInput, v})
	}
	for _, v := range g.outputs {
		fields = append(fields, field{pb.GraphOutput, v})
	}
	return fields
}

// If appends an If node on the boolean scalar cond: then and els each
// build one branch, in a subgraph that can read every value of g defined
// so far, and return the branch's output, of element type elemType and
// shape dims. If returns the node's output. A branch's values share g's
// names, so no name is defined twice anywhere in the model; reading a
// branch's value outside it is not caught here but by ONNX Runtime when
// it loads the model.
func (g *Graph) If(cond string, elemType int, dims []Dim, then, els func(b *Graph) string) string {
	out := g.fresh("If")
	var attrs []Attr
	for i, build := range []func(*Graph) string{then, els} {
		name := []string{"then_branch", "else_branch"}[i]
		b := &Graph{name: out + "_" + name, names: g.names, counter: g.counter}
		res := build(b)
		g.counter, g.ms = b.counter, g.ms || b.ms
		if b.err != nil && g.err == nil {
			g.err = b.err
		}
		b.outputs = append(b.outputs, encodeValueInfo(res, elemType, dims))
		var body []byte
		for _, f := range b.fields() {
			body = appendBytes(body, f.num, f.b)
		}
		attrs = append(attrs, attrGraph(name, body))
	}
	g.node("", "If", []string{cond}, []string{out}, attrs)
	return out
}

// MaxModelBytes is protobuf's 2 GiB message limit; larger models would need
// ONNX external data, which this writer does not produce.
const MaxModelBytes = 1<<31 - 1

// WriteTo writes the graph as a complete ModelProto. It streams the
// initializers rather than building one big buffer.
func (g *Graph) WriteTo(w io.Writer) (int64, error) {
	if g.err != nil {
		return 0, g.err
	}
	fields := g.fields()
	var graphLen int
	for _, f := range fields {
		graphLen += protowire.SizeTag(f.num) + protowire.SizeBytes(len(f.b))
	}
	if graphLen > MaxModelBytes-1<<20 {
		return 0, fmt.Errorf("onnx: graph is %d bytes, over protobuf's 2 GiB limit (external data is not supported)", graphLen)
	}
	var head []byte
	head = appendInt(head, pb.ModelIRVersion, IRVersion)
	head = appendString(head, pb.ModelProducerName, "anna")
	head = appendString(head, pb.ModelProducerVer, "1")
	opset := appendString(nil, pb.OpsetDomain, "")
	opset = appendInt(opset, pb.OpsetVersion, Opset)
	head = appendBytes(head, pb.ModelOpsetImport, opset)
	if g.ms {
		ms := appendString(nil, pb.OpsetDomain, MSDomain)
		ms = appendInt(ms, pb.OpsetVersion, 1)
		head = appendBytes(head, pb.ModelOpsetImport, ms)
	}
	keys := make([]string, 0, len(g.metadata))
	for k := range g.metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic bytes, so fingerprints are stable
	for _, k := range keys {
		e := appendString(nil, pb.StringEntryKey, k)
		e = appendString(e, pb.StringEntryValue, g.metadata[k])
		head = appendBytes(head, pb.ModelMetadataProps, e)
	}
	head = protowire.AppendTag(head, pb.ModelGraph, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(graphLen))

	var total int64
	write := func(b []byte) error {
		n, err := w.Write(b)
		total += int64(n)
		return err
	}
	if err := write(head); err != nil {
		return total, fmt.Errorf("onnx: writing model: %w", err)
	}
	for _, f := range fields {
		var pre []byte
		pre = protowire.AppendTag(pre, f.num, protowire.BytesType)
		pre = protowire.AppendVarint(pre, uint64(len(f.b)))
		if err := write(pre); err != nil {
			return total, fmt.Errorf("onnx: writing model: %w", err)
		}
		if err := write(f.b); err != nil {
			return total, fmt.Errorf("onnx: writing model: %w", err)
		}
	}
	return total, nil
}

// MatMulGraph is a one-node model, C = A·B over float32 inputs "a" and "b"
// of any compatible shapes; benchmarks use it to measure what ONNX Runtime's
// GEMM reaches on this machine.
func MatMulGraph() *Graph {
	g := NewGraph("matmul")
	a := g.Input("a", Float, Dim{Param: "m"}, Dim{Param: "k"})
	b := g.Input("b", Float, Dim{Param: "k"}, Dim{Param: "n"})
	g.OpNamed("MatMul", "c", []string{a, b})
	g.Output("c", Float, Dim{Param: "m"}, Dim{Param: "n"})
	return g
}
