package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/anna-search/anna/hint"
)

// TestWireErrors: an error a writer returns to a reader that reads through
// it keeps its message, the sentinels errors.Is finds and the typed errors
// errors.As finds; the writer's ErrClosed means it has gone.
func TestWireErrors(t *testing.T) {
	across := func(err error) error {
		raw, jerr := json.Marshal(toWire(err))
		if jerr != nil {
			t.Fatal(jerr)
		}
		var w wireError
		if jerr := json.Unmarshal(raw, &w); jerr != nil {
			t.Fatal(jerr)
		}
		return w.err()
	}
	opt := fmt.Errorf("engine: search: %w", optErr("SearchOptions.K", -1, "must be positive"))
	got := across(opt)
	var oe *OptionError
	if got.Error() != opt.Error() || !errors.Is(got, ErrInvalidOption) || !errors.As(got, &oe) || oe.Field != "SearchOptions.K" {
		t.Errorf("option error across: %v", got)
	}
	rec := &RecoveryError{Dir: "d", Index: "BM25", Reason: "is 3 changes behind"}
	var re *RecoveryError
	if got := across(rec); !errors.Is(got, ErrNeedsRecovery) || !errors.As(got, &re) || *re != *rec {
		t.Errorf("recovery error across: %v", got)
	}
	for _, sentinel := range []error{ErrUnsupported, ErrEmptyID, ErrModelNotFound, context.Canceled, ErrLocked} {
		if got := across(fmt.Errorf("engine: x: %w", sentinel)); !errors.Is(got, sentinel) || errors.Is(got, errGone) {
			t.Errorf("%v across: %v", sentinel, got)
		}
	}
	// A hint crosses too, on a typed error or on any other.
	if hs := hint.Of(across(rec)); len(hs) != 1 || hs[0] != (hint.Action{Kind: hint.Repair, Index: "d"}) {
		t.Errorf("recovery error's hint across: %+v", hs)
	}
	act := hint.Action{Kind: hint.InstallModel, Model: "bge-small-en-v1.5"}
	if got := across(hint.Errorf(act, "x: %w", ErrModelNotFound)); !errors.Is(got, ErrModelNotFound) || len(hint.Of(got)) != 1 || hint.Of(got)[0] != act {
		t.Errorf("hinted error across: %v %+v", got, hint.Of(got))
	}
	if got := across(ErrClosed); !errors.Is(got, errGone) {
		t.Errorf("the writer's ErrClosed across: %v (want errGone)", got)
	}
	if got := across(errors.New("plain")); got.Error() != "plain" || errors.Is(got, ErrUnsupported) {
		t.Errorf("plain error across: %v", got)
	}
}
