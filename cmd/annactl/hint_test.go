package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/hint"
)

// TestHintCommand: every action a library error suggests renders as the
// annactl command that does it.
func TestHintCommand(t *testing.T) {
	for _, c := range []struct {
		a    hint.Action
		want string
	}{
		{hint.Action{Kind: hint.InstallModel, Model: "bge-small-en-v1.5"}, "annactl models install bge-small-en-v1.5"},
		{hint.Action{Kind: hint.InstallModel}, "annactl models install NAME"},
		{hint.Action{Kind: hint.ListModels}, "annactl models list"},
		{hint.Action{Kind: hint.ImportModel}, "annactl models import SRC DEST_DIR"},
		{hint.Action{Kind: hint.ImportModel, Option: "task", Value: "rerank"}, "annactl models import --task rerank SRC DEST_DIR"},
		{hint.Action{Kind: hint.AddModel}, "annactl models add MODEL_DIR"},
		{hint.Action{Kind: hint.Reindex, Index: "my idx"}, "annactl reindex --index 'my idx' --model MODEL"},
		{hint.Action{Kind: hint.Reindex, Index: "idx", Option: "chunking", Value: "window=128,stride=half"}, "annactl reindex --index idx --chunk-tokens N"},
		{hint.Action{Kind: hint.Repair, Index: "/tmp/idx"}, "annactl check --index /tmp/idx --repair"},
		{hint.Action{Kind: hint.AddDocuments, Index: "idx"}, "annactl index --index idx FILE"},
		{hint.Action{Kind: hint.BuildReranker}, "annactl rerankers build"},
		{hint.Action{Kind: hint.MineNegatives}, "annactl mine-negatives"},
		{hint.Action{Kind: hint.SetOption, Option: "server.Limits.MaxTextBytes"}, "annactl serve --max-text BYTES"},
		{hint.Action{Kind: hint.SetOption, Option: "server.Options.Reranker"}, "annactl serve --reranker NAME|DIR"},
		{hint.Action{Kind: hint.SetOption, Option: "adapt.Config.Generate", Value: "0"}, "annactl adapt without --generate"},
		{hint.Action{Kind: hint.SetOption, Option: "server.Options.ReadOnly", Value: "unset"}, "annactl serve without --read-only"},
		{hint.Action{Kind: hint.SetOption, Option: "server.Options.StrictModel", Value: "true"}, "annactl serve --strict-model"},
		{hint.Action{Kind: hint.SetOption, Option: "mining.Options.Resume", Value: "unset"}, "annactl mine-negatives without --resume"},
		{hint.Action{Kind: hint.SetOption, Option: "train.Config.ModelDir", Value: "FILE.gguf"}, "annactl train --model FILE.gguf"},
		{hint.Action{Kind: hint.SetOption, Option: "adapt.Config.Base", Value: "DIR"}, "annactl adapt --base DIR"},
		{hint.Action{Kind: hint.SetOption, Option: "engine.Options.Unknown"}, ""},
	} {
		if got := hintCommand(c.a); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

// TestHintsPrinted: annactl prints the command an error's hint names
// under the library's message, which names none.
func TestHintsPrinted(t *testing.T) {
	tmp := t.TempDir()
	none := filepath.Join(tmp, "none")
	r := annactl(t, "", "search", "--index", none, "anything")
	if r.code != 1 || !strings.Contains(r.stderr, "not an anna directory") || !strings.HasSuffix(r.stderr, "\n  run: annactl index --index "+none+" FILE\n") {
		t.Errorf("search of a directory that is not an index: %s", r)
	}
	// A store emptied behind anna's back: repair it.
	empty := filepath.Join(tmp, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, "anna.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = annactl(t, "", "stats", "--index", empty)
	if r.code != 1 || !strings.Contains(r.stderr, "anna.db is empty") || !strings.HasSuffix(r.stderr, "\n  run: annactl check --index "+empty+" --repair\n") {
		t.Errorf("stats of an emptied store: %s", r)
	}
	msg, _, _ := strings.Cut(r.stderr, "\n")
	if strings.Contains(msg, "annactl check") {
		t.Errorf("the library's message names the command itself: %s", msg)
	}
}
