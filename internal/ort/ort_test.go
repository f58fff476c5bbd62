//go:build cgo && !annapure

package ort

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

func TestMissingLibrary(t *testing.T) {
	if os.Getenv("ANNA_ORT_CHILD") == "1" {
		err := Init()
		if err == nil {
			os.Exit(3)
		}
		os.Stderr.WriteString(err.Error())
		if _, err2 := NewSessionOptions(Options{}); err2 == nil {
			os.Exit(4)
		}
		os.Exit(0)
	}
	// Init is once per process, so the missing-library case runs in a child.
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$")
	cmd.Env = append(os.Environ(), "ANNA_ORT_CHILD=1", "ANNA_ORT_LIB=/nonexistent/libonnxruntime.so.1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v (%s)", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "anna-env setup") || !strings.Contains(msg, "/nonexistent/libonnxruntime.so.1") {
		t.Errorf("missing-library error should name the path and `anna-env setup`: %q", msg)
	}
}

func TestInitOnce(t *testing.T) {
	if _, err := os.Stat(home.ORTLibrary()); err != nil {
		t.Skipf("ONNX Runtime not installed (run `make setup`): %v", err)
	}
	for range 3 {
		if err := Init(); err != nil {
			t.Fatal(err)
		}
	}
	so, err := NewSessionOptions(Options{IntraOpThreads: 1, Spin: true})
	if err != nil {
		t.Fatal(err)
	}
	so.Destroy()
	if _, err := NewSessionFromBytes([]byte("garbage"), []string{"a"}, []string{"b"}, Options{}); err == nil {
		t.Error("loading a garbage model succeeded")
	}
}
