package inference

import (
	"context"
	"errors"
	"testing"
	"time"
)

type nopRunner struct{ closed chan struct{} }

func (nopRunner) run([]int64, []int64, []int64, int, int, []float32) ([]float32, error) {
	return nil, nil
}
func (r nopRunner) close() error { close(r.closed); return nil }

// TestSessionCreationSeesCancel: a caller whose context ends while the
// session is being created (ONNX Runtime's takes up to a second or two and
// ignores contexts) returns at once; the creation finishes in the
// background, the next caller gets it, and Close frees it.
func TestSessionCreationSeesCancel(t *testing.T) {
	release := make(chan struct{})
	r := nopRunner{closed: make(chan struct{})}
	calls := 0
	m := &Model{spec: Spec{Name: "test"}, newRunner: func(*Model) (runner, error) {
		calls++
		<-release
		return r, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	done := make(chan error, 1)
	go func() { _, err := m.session(ctx); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("session with a cancelled context: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session creation did not return on cancel (hung until the creation ended)")
	}
	close(release)
	got, err := m.session(context.Background())
	if err != nil || got == nil {
		t.Fatalf("the next caller: %v, %v", got, err)
	}
	if calls != 1 {
		t.Errorf("the runner was created %d times, want once", calls)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.closed:
	default:
		t.Error("Close did not free the session created in the background")
	}
}
