package main

import (
	"context"
	"strings"
	"testing"
)

func TestTrainDeviceCUDAClearError(t *testing.T) {
	err := checkCUDA(context.Background())
	if err == nil {
		t.Fatal("checkCUDA must refuse until the CUDA loop is verified on hardware")
	}
	// Without a GPU (CI) the message names what is missing.
	if !strings.Contains(err.Error(), "--device cuda:") || !(strings.Contains(err.Error(), "libcuda") || strings.Contains(err.Error(), "GPU") || strings.Contains(err.Error(), "found")) {
		t.Fatalf("unclear error: %v", err)
	}
}
