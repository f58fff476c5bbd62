// Package onnxfile reads ONNX model files: the graph's nodes (with the
// attributes importers look at) and its initializers, decoded to float32 or
// int64 — enough to recover a model's weights, not to run it. It is the one
// piece of the ONNX format that the runtime needs (the pure-Go backend reads
// a model's weights from its graph), so it stands apart from internal/model/onnx, the
// converter that writes graphs; internal/model/onnx re-exports these names.
//
// Invariants: Read never panics on malformed input (it returns an error
// naming the field); it reads only what it is given (no external data
// files).
package onnxfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	pb "github.com/anna-search/anna/internal/model/onnxpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// A ReadModel is what Read keeps of an ONNX file: the graph's nodes (with
// the attributes importers look at) and its initializers, decoded to
// float32 or int64. Enough to recover a model's weights, not to run it.
type ReadModel struct {
	Nodes        []Node
	Initializers map[string]*Tensor
}

// Node is one NodeProto.
type Node struct {
	Name, OpType string
	Domain       string // "" for the ONNX standard operators
	Inputs       []string
	Outputs      []string
	Attrs        map[string]Attribute
}

// Attribute is one AttributeProto of the kinds importers read.
type Attribute struct {
	F    float32
	I    int64
	Ints []int64
	T    *Tensor
	G    *ReadModel // a GRAPH attribute: an If node's branch
}

// Tensor is a decoded TensorProto: Float holds FLOAT (and DOUBLE) data,
// Int64 INT64, INT32, INT8 and UINT8 data (DataType stays Int8 and Uint8
// for the last two, the others read as Float and Int64); Shape is its dims.
type Tensor struct {
	Name     string
	Shape    []int
	DataType int
	Float    []float32
	Int64    []int64
}

// doubleType is TensorProto's DOUBLE, which Read decodes to float32.
const doubleType = 11

// Element types (TensorProto.DataType) that Read decodes.
const (
	Float = 1
	Uint8 = 2
	Int8  = 3
	Int32 = 6
	Int64 = 7
	Bool  = 9
)

// ReadFile reads an ONNX model file.
func ReadFile(path string) (*ReadModel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Read decodes an ONNX ModelProto. Tensors stored outside the file
// (external data) and element types other than float, double, int32 and
// int64 are refused, naming the tensor.
func Read(b []byte) (*ReadModel, error) {
	var graph []byte
	if err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == pb.ModelGraph && typ == protowire.BytesType {
			graph = v
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("not an ONNX model: %w", err)
	}
	if graph == nil {
		return nil, fmt.Errorf("not an ONNX model: no graph")
	}
	m, err := readGraph(graph, 0)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	return m, nil
}

// maxGraphDepth bounds how deeply subgraphs (an If node's branches) nest:
// anna's graphs nest one deep, and a reader that recursed once per level
// of a crafted file would recurse as deep as the file is long.
const maxGraphDepth = 16

// readGraph decodes a GraphProto's nodes and initializers; depth is how
// many graphs it is nested in.
func readGraph(graph []byte, depth int) (*ReadModel, error) {
	if depth > maxGraphDepth {
		return nil, fmt.Errorf("subgraphs nested more than %d deep", maxGraphDepth)
	}
	m := &ReadModel{Initializers: map[string]*Tensor{}}
	err := fields(graph, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case pb.GraphNode:
			n, err := readNode(v, depth)
			if err != nil {
				return err
			}
			m.Nodes = append(m.Nodes, n)
		case pb.GraphInitializer:
			t, err := readTensor(v)
			if err != nil {
				return err
			}
			m.Initializers[t.Name] = t
		}
		return nil
	})
	return m, err
}

// fields calls fn for each field of a protobuf message: v is the payload of
// a bytes field, x the value of a varint or fixed one.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func readNode(b []byte, depth int) (Node, error) {
	n := Node{Attrs: map[string]Attribute{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case pb.NodeInput:
			n.Inputs = append(n.Inputs, string(v))
		case pb.NodeOutput:
			n.Outputs = append(n.Outputs, string(v))
		case pb.NodeName:
			n.Name = string(v)
		case pb.NodeOpType:
			n.OpType = string(v)
		case pb.NodeDomain:
			n.Domain = string(v)
		case pb.NodeAttribute:
			name, a, err := readAttr(v, depth)
			if err != nil {
				return err
			}
			n.Attrs[name] = a
		}
		return nil
	})
	if err != nil {
		return Node{}, fmt.Errorf("node %q: %w", n.Name, err)
	}
	return n, nil
}

func readAttr(b []byte, depth int) (string, Attribute, error) {
	var name string
	var a Attribute
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == pb.AttrName && typ == protowire.BytesType:
			name = string(v)
		case num == pb.AttrF && typ == protowire.Fixed32Type:
			a.F = math.Float32frombits(uint32(x))
		case num == pb.AttrI && typ == protowire.VarintType:
			a.I = int64(x)
		case num == pb.AttrInts && typ == protowire.VarintType:
			a.Ints = append(a.Ints, int64(x))
		case num == pb.AttrInts && typ == protowire.BytesType:
			for len(v) > 0 {
				y, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return protowire.ParseError(n)
				}
				a.Ints = append(a.Ints, int64(y))
				v = v[n:]
			}
		case num == pb.AttrT && typ == protowire.BytesType:
			t, err := readTensor(v)
			if err != nil {
				return err
			}
			a.T = t
		case num == pb.AttrG && typ == protowire.BytesType:
			g, err := readGraph(v, depth+1)
			if err != nil {
				return err
			}
			a.G = g
		}
		return nil
	})
	return name, a, err
}

func readTensor(b []byte) (*Tensor, error) {
	t := &Tensor{}
	var raw []byte
	var external bool
	var packed [][]byte
	var ints []int64
	var floats []float32
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case pb.TensorDims:
			if typ == protowire.VarintType {
				t.Shape = append(t.Shape, int(int64(x)))
			} else if typ == protowire.BytesType {
				for len(v) > 0 {
					y, n := protowire.ConsumeVarint(v)
					if n < 0 {
						return protowire.ParseError(n)
					}
					t.Shape = append(t.Shape, int(int64(y)))
					v = v[n:]
				}
			}
		case pb.TensorDataType:
			t.DataType = int(x)
		case pb.TensorName:
			t.Name = string(v)
		case pb.TensorRawData:
			raw = v
		case pb.TensorDataLocation:
			external = x == 1
		case pb.TensorFloatData:
			if typ == protowire.Fixed32Type {
				floats = append(floats, math.Float32frombits(uint32(x)))
			} else {
				packed = append(packed, v)
			}
		case pb.TensorInt64Data, pb.TensorInt32Data:
			if typ == protowire.VarintType {
				ints = append(ints, int64(x))
			} else {
				for len(v) > 0 {
					y, n := protowire.ConsumeVarint(v)
					if n < 0 {
						return protowire.ParseError(n)
					}
					ints = append(ints, int64(y))
					v = v[n:]
				}
			}
		case pb.TensorDoubleData:
			if typ == protowire.Fixed64Type {
				floats = append(floats, float32(math.Float64frombits(x)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if external {
		return nil, fmt.Errorf("tensor %q: stored as external data (a separate file), which is not read", t.Name)
	}
	for _, p := range packed {
		for i := 0; i+4 <= len(p); i += 4 {
			floats = append(floats, math.Float32frombits(binary.LittleEndian.Uint32(p[i:])))
		}
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return nil, fmt.Errorf("tensor %q: negative dimension in %v", t.Name, t.Shape)
		}
		if d > 0 && n > math.MaxInt32/d {
			// More elements than a tensor of this reader can hold (their
			// count wrapped around, and data of a wrapped size was read
			// past its end).
			return nil, fmt.Errorf("tensor %q: shape %v has more than %d elements", t.Name, t.Shape, math.MaxInt32)
		}
		n *= d
	}
	switch t.DataType {
	case Float:
		switch {
		case raw != nil:
			if len(raw) != 4*n {
				return nil, fmt.Errorf("tensor %q: %d bytes of data for shape %v (want %d)", t.Name, len(raw), t.Shape, 4*n)
			}
			t.Float = make([]float32, n)
			for i := range t.Float {
				t.Float[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		default:
			t.Float = floats
		}
		if len(t.Float) != n {
			return nil, fmt.Errorf("tensor %q: %d values for shape %v", t.Name, len(t.Float), t.Shape)
		}
	case doubleType:
		if raw != nil {
			if len(raw) != 8*n {
				return nil, fmt.Errorf("tensor %q: %d bytes of data for shape %v (want %d)", t.Name, len(raw), t.Shape, 8*n)
			}
			for i := 0; i < n; i++ {
				floats = append(floats, float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))))
			}
		}
		t.Float, t.DataType = floats, Float
		if len(t.Float) != n {
			return nil, fmt.Errorf("tensor %q: %d values for shape %v", t.Name, len(t.Float), t.Shape)
		}
	case Int64, Int32:
		size := 8
		if t.DataType == Int32 {
			size = 4
		}
		if raw != nil {
			if len(raw) != size*n {
				return nil, fmt.Errorf("tensor %q: %d bytes of data for shape %v (want %d)", t.Name, len(raw), t.Shape, size*n)
			}
			for i := 0; i < n; i++ {
				if size == 8 {
					ints = append(ints, int64(binary.LittleEndian.Uint64(raw[8*i:])))
				} else {
					ints = append(ints, int64(int32(binary.LittleEndian.Uint32(raw[4*i:]))))
				}
			}
		}
		t.Int64, t.DataType = ints, Int64
		if len(t.Int64) != n {
			return nil, fmt.Errorf("tensor %q: %d values for shape %v", t.Name, len(t.Int64), t.Shape)
		}
	case Int8, Uint8:
		// int8 weights, packed 4-bit weights (MatMulNBits), zero points.
		// ONNX stores 8-bit values either as raw bytes or, one per
		// element, in int32_data (as onnx.helper.make_tensor writes small
		// tensors such as a scalar zero point).
		kind := "int8"
		if t.DataType == Uint8 {
			kind = "uint8"
		}
		switch {
		case raw != nil:
			if len(raw) != n {
				return nil, fmt.Errorf("tensor %q: %d bytes of %s data for shape %v (want %d)", t.Name, len(raw), kind, t.Shape, n)
			}
			t.Int64 = make([]int64, n)
			for i, b := range raw {
				if t.DataType == Int8 {
					t.Int64[i] = int64(int8(b))
				} else {
					t.Int64[i] = int64(b)
				}
			}
		default:
			if len(ints) != n {
				return nil, fmt.Errorf("tensor %q: %d values of %s data for shape %v (want %d)", t.Name, len(ints), kind, t.Shape, n)
			}
			t.Int64 = make([]int64, n)
			for i, v := range ints {
				if t.DataType == Int8 {
					if v < -128 || v > 127 {
						return nil, fmt.Errorf("tensor %q: value %d out of int8's range", t.Name, v)
					}
				} else if v < 0 || v > 255 {
					return nil, fmt.Errorf("tensor %q: value %d out of uint8's range", t.Name, v)
				}
				t.Int64[i] = v
			}
		}
	default:
		// Other types (bool, uint8, float16, ...) are kept shape-only: a
		// weight of such a type is refused where it is needed.
	}
	return t, nil
}
