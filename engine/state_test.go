package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// TestCallerState: SetState's records survive a reopen apart from the
// engine's own state (a caller's "search.fusion" is not the fusion), nil
// deletes, and a read-only engine reads but refuses to write.
func TestCallerState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	enc := &encodertest.Hashing{D: 8, FP: "fp"}
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.SetState("search.fusion", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if err := eng.SetState("gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := eng.SetState("gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := eng.SetState("", []byte("x")); err == nil {
		t.Error("an empty key was taken")
	}
	eng.Close()
	ro, err := engine.Open(ctx, dir, engine.Options{Encoder: enc, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if w := ro.Warnings(); len(w) != 0 {
		t.Errorf("the caller's record read as the engine's: %v", w)
	}
	if v, err := ro.State("search.fusion"); err != nil || string(v) != "not json" {
		t.Errorf("State = %q, %v", v, err)
	}
	if v, err := ro.State("gone"); err != nil || v != nil {
		t.Errorf("deleted State = %q, %v", v, err)
	}
	if err := ro.SetState("k", []byte("v")); !errors.Is(err, engine.ErrReadOnly) {
		t.Errorf("read-only SetState: %v", err)
	}
}
