// Package stagefile keeps a resumable job's record in its work folder: the
// settings the job was begun with, the stages it has finished, and what it
// has to report so far — one JSON file (train/recipe's recipe.json,
// train/adapt's adapt.json).
//
// Invariants: the file is replaced atomically (internal/atomicfile), so a
// kill leaves the previous record or the new one, never a torn file; a
// record begun with other settings is refused, naming the first field that
// differs, so a job never resumes work made under settings it was not given.
package stagefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/anna-search/anna/internal/atomicfile"
)

// Record is a job's record: S holds its settings (a struct compared field
// by field), R what it reports (omitted from the file while zero).
type Record[S, R any] struct {
	Settings S               `json:"settings"`
	Done     map[string]bool `json:"done"`
	Report   R               `json:"report,omitzero"`

	path string
}

// Open reads the record file name in the work folder dir, or, when there is
// none, creates dir and starts a record with want. what names the job in
// errors ("recipe"), noun its run ("build"). A record begun with settings
// other than want is refused.
func Open[S, R any](what, noun, dir, name string, want S) (*Record[S, R], error) {
	r := &Record[S, R]{Settings: want, Done: map[string]bool{}, path: filepath.Join(dir, name)}
	bs, err := os.ReadFile(r.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return r, r.Save()
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(bs, r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w (delete the work directory to start over)", what, r.path, err)
	}
	if r.Done == nil {
		r.Done = map[string]bool{}
	}
	got, wv := reflect.ValueOf(r.Settings), reflect.ValueOf(want)
	if got.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s: settings of type %s are not a struct", what, got.Type())
	}
	for i := range got.NumField() {
		if !reflect.DeepEqual(got.Field(i).Interface(), wv.Field(i).Interface()) {
			return nil, fmt.Errorf("%s: %s was begun with %s %v; this %s asks for %v: give the same settings to continue it, or another work directory",
				what, dir, got.Type().Field(i).Name, got.Field(i).Interface(), noun, wv.Field(i).Interface())
		}
	}
	return r, nil
}

// Save writes the record, replacing the file atomically.
func (r *Record[S, R]) Save() error {
	bs, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(r.path, append(bs, '\n'))
}

// Finish marks stage done and saves the record.
func (r *Record[S, R]) Finish(stage string) error {
	r.Done[stage] = true
	return r.Save()
}
