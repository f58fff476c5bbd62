package engine

import (
	"errors"
	"fmt"

	"github.com/anna-search/anna/hint"
)

// Errors returned by the engine; test them with errors.Is.
var (
	ErrClosed        = errors.New("engine: closed")
	ErrReadOnly      = errors.New("engine: opened read-only")
	ErrEmptyQuery    = errors.New("engine: empty query")
	ErrEmptyDocument = errors.New("empty title and text")
	// ErrEmptyID: a document given to Add, or an ID given to Get or
	// Delete, is "" (for Add, blank).
	ErrEmptyID = errors.New("empty ID")
	// ErrInvalidDocument: a document given to Add breaks a rule of
	// Document (an ID longer than MaxIDBytes or not UTF-8, an empty or
	// oversized metadata key, a number that is not finite): the caller's
	// mistake, named in the error's text.
	ErrInvalidDocument = errors.New("invalid document")
	ErrInvalidOption   = errors.New("engine: invalid option")
	// ErrNotIndex: a read-only Open (or Check) of a directory without anna.db.
	ErrNotIndex = errors.New("not an anna directory")
	// ErrLocked: another process has the directory open for writing.
	ErrLocked = errors.New("locked by another process")
	// ErrDamaged is wrapped by DamageError.
	ErrDamaged = errors.New("damaged")
	// ErrNeedsRecovery is wrapped by RecoveryError.
	ErrNeedsRecovery = errors.New("needs recovery")
	// ErrUnsupported: the engine's backend cannot do what was asked (the
	// Weaviate backend scoring a text it does not hold).
	ErrUnsupported = errors.New("not supported by this backend")
)

// invalidDoc marks an error of a document given to Add as
// ErrInvalidDocument, its text unchanged.
type invalidDoc struct{ error }

func (e invalidDoc) Is(target error) bool { return target == ErrInvalidDocument }
func (e invalidDoc) Unwrap() error        { return e.error }

// OptionError reports an option out of its range: a negative K, a batch
// size of -1, an unknown mode. It wraps ErrInvalidOption.
type OptionError struct {
	Field  string // the option, as named in Go ("SearchOptions.K")
	Value  any
	Reason string // what it must be
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("engine: %s = %v: %s", e.Field, e.Value, e.Reason)
}

func (e *OptionError) Unwrap() error { return ErrInvalidOption }

// DamageError reports a directory whose store is missing, empty or
// damaged, so that it cannot be opened without losing what it held. Check
// names every problem; Repair salvages what can be saved (its hint). It
// wraps ErrDamaged.
type DamageError struct {
	Dir  string
	What string // what is wrong
	Fix  string // what to do, in words
	Err  error  // the underlying error, if any
}

// Hints is what to do about it: repair Dir (hint.Of).
func (e *DamageError) Hints() []hint.Action {
	return []hint.Action{{Kind: hint.Repair, Index: e.Dir}}
}

func (e *DamageError) Error() string {
	s := fmt.Sprintf("engine: %s: %s", e.Dir, e.What)
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

func (e *DamageError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrDamaged, e.Err}
	}
	return []error{ErrDamaged}
}

// RecoveryError is returned by a search on an engine opened read-only whose
// BM25 index is not in step with the store (a write was interrupted): a
// read-only engine cannot bring it up to date, and would otherwise answer
// from stale postings. Opening the directory for writing once (any write,
// or Repair: its hint) replays what is missing. It wraps ErrNeedsRecovery.
type RecoveryError struct {
	Dir    string
	Index  string // "BM25"
	Reason string
}

func (e *RecoveryError) Error() string {
	return fmt.Sprintf("engine: %s: the %s index %s; open the directory for writing once to bring it up to date (any write, or Repair)", e.Dir, e.Index, e.Reason)
}

// Hints is what to do about it: repair Dir (hint.Of).
func (e *RecoveryError) Hints() []hint.Action {
	return []hint.Action{{Kind: hint.Repair, Index: e.Dir}}
}

func (e *RecoveryError) Unwrap() error { return ErrNeedsRecovery }

// ModelMismatchError reports an index opened with a model other than the one
// that built it. Index and Model are the two fingerprints; the message names
// each model by its manifest name (IndexName, ModelName; "" when unknown)
// and short fingerprint. Its hint: reindex Dir.
type ModelMismatchError struct{ Dir, Index, Model, IndexName, ModelName string }

func (m *ModelMismatchError) Error() string {
	a, b := modelLabel(m.IndexName, m.Index), modelLabel(m.ModelName, m.Model)
	if a == b { // equal names and 12-digit prefixes: show all of both
		a, b = m.IndexName+" ("+m.Index+")", m.ModelName+" ("+m.Model+")"
	}
	return fmt.Sprintf("engine: %s was indexed with model %s but is being opened with model %s; open it with the original model, or move it to the new one (Reindex)", m.Dir, a, b)
}

// Hints is what to do about it: reindex Dir with a model (hint.Of).
func (m *ModelMismatchError) Hints() []hint.Action {
	return []hint.Action{{Kind: hint.Reindex, Index: m.Dir}}
}

func optErr(field string, value any, reason string) error {
	return &OptionError{Field: field, Value: value, Reason: reason}
}
