// Package onnx writes ONNX models from Go: a small graph builder whose
// protobuf is encoded by hand with protowire (field numbers from onnx.proto,
// no generated code), and exporters for BERT encoders and cross-encoders
// built from safetensors weights.
//
// BERT-family graphs are written fused by default: each layer is ONNX
// Runtime's com.microsoft MultiHeadAttention, SkipLayerNormalization and
// BiasGelu/FastGelu kernels (fuse.go), which its optimizer does not find
// in the standard-operator form; they run in ONNX Runtime only.
// BuildOptions.Unfused writes the standard-operator form (the graph of
// before the fusion), which computes the same function (TestFusedGraph:
// ≤ 1e-6 apart). BuildOptions.Quantize writes the int8 form (quantize.go),
// an approximation: MiniLM's vectors keep cosine ≥ 0.99 to float32 ones
// on real text (encoder's TestQuantizedMiniLM). Decoders (llama.go) have
// one standard-operator float32 graph.
//
// A nil context.Context given to a function of this package is
// context.Background().
package onnx

import (
	"encoding/binary"
	"math"

	"github.com/anna-search/anna/internal/model/onnxfile"
	pb "github.com/anna-search/anna/internal/model/onnxpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Versions written into every model: IR 8 with the default-domain opset 17
// (LayerNormalization is a standard op from 17) loads in ONNX Runtime ≥ 1.14.
const (
	IRVersion = 8
	Opset     = 17
)

// Element types (TensorProto.DataType): onnxfile's.
const (
	Float = onnxfile.Float
	Uint8 = onnxfile.Uint8
	Int8  = onnxfile.Int8
	Int32 = onnxfile.Int32
	Int64 = onnxfile.Int64
	Bool  = onnxfile.Bool
)

// MSDomain is ONNX Runtime's contrib operator set, com.microsoft (version
// 1): the fused kernels its CPU provider has, such as MultiHeadAttention,
// SkipLayerNormalization, BiasGelu and MatMulIntegerToFloat. A model that
// uses them runs in ONNX Runtime only.
const MSDomain = "com.microsoft"

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendFloat(b []byte, num protowire.Number, v float32) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

// Attr is one node attribute, already encoded as an AttributeProto.
type Attr []byte

// AttrInt is an INT attribute.
func AttrInt(name string, v int64) Attr {
	b := appendString(nil, pb.AttrName, name)
	b = appendInt(b, pb.AttrI, v)
	return appendInt(b, pb.AttrType, pb.AttrINT)
}

// AttrFloat is a FLOAT attribute.
func AttrFloat(name string, v float32) Attr {
	b := appendString(nil, pb.AttrName, name)
	b = appendFloat(b, pb.AttrF, v)
	return appendInt(b, pb.AttrType, pb.AttrFLOAT)
}

// AttrInts is an INTS attribute.
func AttrInts(name string, v ...int64) Attr {
	b := appendString(nil, pb.AttrName, name)
	for _, x := range v {
		b = appendInt(b, pb.AttrInts, x)
	}
	return appendInt(b, pb.AttrType, pb.AttrINTS)
}

// attrGraph is a GRAPH attribute holding an encoded GraphProto (an If
// node's branch).
func attrGraph(name string, graph []byte) Attr {
	b := appendString(nil, pb.AttrName, name)
	b = appendBytes(b, pb.AttrG, graph)
	return appendInt(b, pb.AttrType, pb.AttrGRAPH)
}

// encodeTensor encodes a TensorProto with raw little-endian data.
func encodeTensor(name string, elemType int, dims []int64, raw []byte) []byte {
	b := make([]byte, 0, len(raw)+len(name)+16+10*len(dims))
	for _, d := range dims {
		b = appendInt(b, pb.TensorDims, d)
	}
	b = appendInt(b, pb.TensorDataType, int64(elemType))
	b = appendString(b, pb.TensorName, name)
	return appendBytes(b, pb.TensorRawData, raw)
}

func floatsRaw(v []float32) []byte {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return raw
}

func int8sRaw(v []int8) []byte {
	raw := make([]byte, len(v))
	for i, x := range v {
		raw[i] = byte(x)
	}
	return raw
}

func int64sRaw(v []int64) []byte {
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
	}
	return raw
}

// Dim is one dimension of a graph input or output: a fixed size, or a named
// dynamic one (Param) such as "batch".
type Dim struct {
	Value int64
	Param string
}

func encodeValueInfo(name string, elemType int, dims []Dim) []byte {
	var shape []byte
	for _, d := range dims {
		var db []byte
		if d.Param != "" {
			db = appendString(nil, pb.DimParam, d.Param)
		} else {
			db = appendInt(nil, pb.DimValue, d.Value)
		}
		shape = appendBytes(shape, pb.ShapeDim, db)
	}
	tt := appendInt(nil, pb.TensorElemType, int64(elemType))
	tt = appendBytes(tt, pb.TensorShape, shape)
	tp := appendBytes(nil, pb.TypeTensor, tt)
	b := appendString(nil, pb.ValueName, name)
	return appendBytes(b, pb.ValueType, tp)
}
