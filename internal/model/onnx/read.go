package onnx

import "github.com/anna-search/anna/internal/model/onnxfile"

// The reader lives in internal/model/onnxfile, a leaf package the runtime can link
// without the converter; these are its names as the converter's code and
// its callers have always used them.
type (
	ReadModel = onnxfile.ReadModel
	Node      = onnxfile.Node
	Attribute = onnxfile.Attribute
	Tensor    = onnxfile.Tensor
	// Int8Columns is an int8 product weight with a scale per output
	// column (an int8 graph's, or a quantized source graph's).
	Int8Columns = onnxfile.Int8Columns
)

// ReadFile reads an ONNX model file (see onnxfile.ReadFile).
func ReadFile(path string) (*ReadModel, error) { return onnxfile.ReadFile(path) }

// Read decodes an ONNX model (see onnxfile.Read).
func Read(b []byte) (*ReadModel, error) { return onnxfile.Read(b) }
