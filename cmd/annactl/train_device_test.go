package main

import (
	"context"
	"strings"
	"testing"
)

func TestTrainDeviceCUDAClearError(t *testing.T) {
	d, err := openCUDA(context.Background(), false)
	if err == nil {
		d.Close()
		t.Skip("a GPU is here: train/cuda's TestRunOnGPUMatchesCPU covers the run")
	}
	// Without a GPU (CI) the message names what is missing.
	if !strings.Contains(err.Error(), "--device cuda:") || !(strings.Contains(err.Error(), "libcuda") || strings.Contains(err.Error(), "GPU") || strings.Contains(err.Error(), "found")) {
		t.Fatalf("unclear error: %v", err)
	}
}
