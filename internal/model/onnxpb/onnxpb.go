// Package onnxpb holds the field numbers of onnx.proto that anna's ONNX
// writer (internal/model/onnx) and reader (internal/model/onnxfile) use:
// the schema in one place. It has no code.
package onnxpb

// Field numbers from onnx.proto, by message.
const (
	// ModelProto
	ModelIRVersion     = 1
	ModelProducerName  = 2
	ModelProducerVer   = 3
	ModelDocString     = 6
	ModelGraph         = 7
	ModelOpsetImport   = 8
	ModelMetadataProps = 14

	// OperatorSetIdProto
	OpsetDomain  = 1
	OpsetVersion = 2

	// GraphProto
	GraphNode        = 1
	GraphName        = 2
	GraphInitializer = 5
	GraphInput       = 11
	GraphOutput      = 12

	// NodeProto
	NodeInput     = 1
	NodeOutput    = 2
	NodeName      = 3
	NodeOpType    = 4
	NodeAttribute = 5
	NodeDomain    = 7

	// AttributeProto
	AttrName = 1
	AttrF    = 2
	AttrI    = 3
	AttrT    = 5
	AttrG    = 6
	AttrInts = 8
	AttrType = 20

	// AttributeProto.type's values (AttributeType)
	AttrFLOAT = 1
	AttrINT   = 2
	AttrGRAPH = 5
	AttrINTS  = 7

	// TensorProto
	TensorDims         = 1
	TensorDataType     = 2
	TensorFloatData    = 4
	TensorInt32Data    = 5
	TensorInt64Data    = 7
	TensorName         = 8
	TensorRawData      = 9
	TensorDoubleData   = 10
	TensorDataLocation = 14

	// ValueInfoProto
	ValueName = 1
	ValueType = 2

	// TypeProto, TypeProto.Tensor, TensorShapeProto and its Dimension
	TypeTensor     = 1
	TensorElemType = 1
	TensorShape    = 2
	ShapeDim       = 1
	DimValue       = 1
	DimParam       = 2

	// StringStringEntryProto
	StringEntryKey   = 1
	StringEntryValue = 2
)
