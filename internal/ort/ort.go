//go:build cgo && !annapure

package ort

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
)

// Built reports whether this build links ONNX Runtime (cgo on, no
// annapure tag).
const Built = true

var (
	initOnce sync.Once
	initErr  error
)

// Init loads the ONNX Runtime library named by home.ORTLibrary() and creates
// the process-wide environment. It is safe to call from many goroutines and
// many times; the first call's result is returned to all.
func Init() error {
	initOnce.Do(func() {
		lib := home.ORTLibrary()
		if _, err := os.Stat(lib); err != nil {
			initErr = fmt.Errorf("ort: ONNX Runtime library not found at %s (%s, or set ANNA_ORT_LIB): %w", lib, home.SetupHint, err)
			return
		}
		if ortgo.IsInitialized() {
			// Someone initialised onnxruntime_go directly; share it.
			return
		}
		ortgo.SetSharedLibraryPath(lib)
		if err := ortgo.InitializeEnvironment(ortgo.WithLogLevelError()); err != nil {
			initErr = fmt.Errorf("ort: initialising ONNX Runtime from %s: %w", lib, err)
		}
	})
	return initErr
}

// Options are the session settings anna exposes. Zero values pick defaults.
type Options struct {
	// IntraOpThreads is the thread count inside one operator (MatMul).
	// 0 means one per CPU core.
	IntraOpThreads int
	// InterOpThreads is the thread count across independent operators;
	// BERT graphs are a chain, so 1 (the default) is right.
	InterOpThreads int
	// Spin lets idle pool threads busy-wait for the next operator. It cuts
	// latency on an otherwise idle machine but burns cores that other
	// processes (parallel test packages, the indexer) need, so it is off
	// unless asked for.
	Spin bool
	// OptimizedModelPath, when set, makes ONNX Runtime write the graph it
	// runs (after its optimisations and fusions) to this file when the
	// session is created; tests read it to check which operators ran.
	OptimizedModelPath string
}

// NewSessionOptions initialises ONNX Runtime if needed and returns session
// options with full graph optimisation and the requested threads. The
// caller destroys them after creating its session.
func NewSessionOptions(o Options) (*ortgo.SessionOptions, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	so, err := ortgo.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("ort: creating session options: %w", err)
	}
	intra := o.IntraOpThreads
	if intra <= 0 {
		intra = runtime.NumCPU()
	}
	inter := o.InterOpThreads
	if inter <= 0 {
		inter = 1
	}
	steps := []struct {
		what string
		fn   func() error
	}{
		{"intra-op threads", func() error { return so.SetIntraOpNumThreads(intra) }},
		{"inter-op threads", func() error { return so.SetInterOpNumThreads(inter) }},
		{"optimisation level", func() error { return so.SetGraphOptimizationLevel(ortgo.GraphOptimizationLevelEnableAll) }},
		{"spinning", func() error {
			v := "0"
			if o.Spin {
				v = "1"
			}
			return errors.Join(so.AddSessionConfigEntry("session.intra_op.allow_spinning", v),
				so.AddSessionConfigEntry("session.inter_op.allow_spinning", v))
		}},
	}
	if o.OptimizedModelPath != "" {
		steps = append(steps, struct {
			what string
			fn   func() error
		}{"optimized model path", func() error { return so.SetOptimizedModelFilePath(o.OptimizedModelPath) }})
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("ort: setting %s: %w", s.what, err)
		}
	}
	return so, nil
}

// NewSession opens path as a DynamicAdvancedSession (shapes chosen per Run)
// with the given input and output names. ONNX Runtime allows concurrent Run
// calls on one session.
func NewSession(path string, inputs, outputs []string, o Options) (*ortgo.DynamicAdvancedSession, error) {
	so, err := NewSessionOptions(o)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	s, err := ortgo.NewDynamicAdvancedSession(path, inputs, outputs, so)
	if err != nil {
		return nil, fmt.Errorf("ort: loading %s: %w", path, err)
	}
	return s, nil
}

// NewSessionFromBytes is NewSession for a model held in memory.
func NewSessionFromBytes(model []byte, inputs, outputs []string, o Options) (*ortgo.DynamicAdvancedSession, error) {
	so, err := NewSessionOptions(o)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	s, err := ortgo.NewDynamicAdvancedSessionWithONNXData(model, inputs, outputs, so)
	if err != nil {
		return nil, fmt.Errorf("ort: loading in-memory model: %w", err)
	}
	return s, nil
}
