package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestQuantization: an int8 manifest round-trips and validates, so
// does an int4 one; a quantization anna does not write is refused naming
// the field.
func TestManifestQuantization(t *testing.T) {
	dir := t.TempDir()
	fp := NewFingerprinter()
	fp.Write([]byte("int8 onnx bytes"))
	m := &Manifest{Name: "x-int8", Architecture: "bert", Task: TaskEmbed, Dim: 8, MaxLength: 16, Pooling: PoolingMean,
		Normalize: true, Quantization: QuantizeInt8, Fingerprint: fp.Sum(PoolingMean, true, 16)}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	back, err := LoadManifest(dir)
	if err != nil || back.Quantization != QuantizeInt8 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	m.Architecture, m.Pooling, m.Quantization = "llama", PoolingLastToken, QuantizeInt4
	m.Fingerprint = fp.Sum(PoolingLastToken, true, 16)
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if back, err := LoadManifest(dir); err != nil || back.Quantization != QuantizeInt4 {
		t.Fatalf("int4 round trip: %+v, %v", back, err)
	}
	os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"architecture":"bert","task":"embed","dim":8,"max_length":16,"pooling":"mean","quantization":"int3","fingerprint":"`+m.Fingerprint+`"}`), 0o644)
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), `field quantization "int3" not supported`) {
		t.Errorf("int3: %v", err)
	}
}
