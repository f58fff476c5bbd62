package onnxfile

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/anna-search/anna/internal/fuzzcheck"
	pb "github.com/anna-search/anna/internal/model/onnxpb"
)

// seedModel is a small ModelProto: a graph with a MatMul node (an int
// list attribute), an If node whose branch holds another node, and float
// (raw and packed), int64 and int8 initializers.
func seedModel() []byte {
	msg := func(fields ...[]byte) []byte {
		var b []byte
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	raw := make([]byte, 16)
	for i := range 4 {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i)))
	}
	tensor := func(name string, typ uint64, data ...[]byte) []byte {
		return msg(append([][]byte{varint(pb.TensorDims, 2), varint(pb.TensorDims, 2), varint(pb.TensorDataType, typ), bytesField(pb.TensorName, []byte(name))}, data...)...)
	}
	node := func(name, op string, attrs ...[]byte) []byte {
		f := [][]byte{bytesField(pb.NodeInput, []byte("x")), bytesField(pb.NodeOutput, []byte("y")), bytesField(pb.NodeName, []byte(name)), bytesField(pb.NodeOpType, []byte(op))}
		for _, a := range attrs {
			f = append(f, bytesField(pb.NodeAttribute, a))
		}
		return msg(f...)
	}
	branch := msg(bytesField(pb.GraphNode, node("inner", "Relu")))
	graph := msg(
		bytesField(pb.GraphNode, node("mm", "MatMul", msg(bytesField(pb.AttrName, []byte("perm")), bytesField(pb.AttrInts, []byte{1, 0})))),
		bytesField(pb.GraphNode, node("if", "If", msg(bytesField(pb.AttrName, []byte("then_branch")), bytesField(pb.AttrG, branch)))),
		bytesField(pb.GraphInitializer, tensor("w", Float, bytesField(pb.TensorRawData, raw))),
		bytesField(pb.GraphInitializer, tensor("p", Float, bytesField(pb.TensorFloatData, raw))),
		bytesField(pb.GraphInitializer, tensor("i", Int64, bytesField(pb.TensorInt64Data, []byte{1, 2, 3, 4}))),
		bytesField(pb.GraphInitializer, tensor("q", Int8, bytesField(pb.TensorRawData, []byte{1, 255, 3, 4}))),
	)
	return bytesField(pb.ModelGraph, graph)
}

// FuzzRead: the ONNX reader on any bytes: it fails or returns a model
// whose tensors hold as many values as their shapes say, within a bounded
// time and at most 64 times the input's size in memory (plus a megabyte:
// a reader that believes a shape before the data was once a way to make
// it allocate gigabytes).
func FuzzRead(f *testing.F) {
	f.Add(seedModel())
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m *ReadModel
		var err error
		n := uint64(0)
		fuzzcheck.Within(t, 10*time.Second, "Read", func() {
			n = fuzzcheck.Allocated(func() { m, err = Read(data) })
		})
		if limit := 64*uint64(len(data)) + 1<<20; n > limit {
			t.Fatalf("Read of %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		var check func(m *ReadModel, depth int)
		check = func(m *ReadModel, depth int) {
			if depth > maxGraphDepth+1 {
				t.Fatalf("subgraphs nested %d deep", depth)
			}
			for name, tn := range m.Initializers {
				size := 1
				for _, d := range tn.Shape {
					size *= d
				}
				switch tn.DataType {
				case Float:
					if len(tn.Float) != size {
						t.Fatalf("tensor %q: %d floats for shape %v", name, len(tn.Float), tn.Shape)
					}
				case Int64, Int8, Uint8:
					if len(tn.Int64) != size {
						t.Fatalf("tensor %q: %d ints for shape %v", name, len(tn.Int64), tn.Shape)
					}
				}
			}
			for _, nd := range m.Nodes {
				for _, a := range nd.Attrs {
					if a.G != nil {
						check(a.G, depth+1)
					}
				}
			}
		}
		check(m, 0)
	})
}
