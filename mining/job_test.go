package mining

import (
	"context"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestMineRefusesBadConfig: a configuration Mine cannot run is refused
// before any model or index is opened, saying what is missing.
func TestMineRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dataset: dir}, "no output file"},
		{Config{Output: "o"}, "no input"},
		{Config{Output: "o", Input: "p"}, "needs an index"},
		{Config{Output: "o", Input: "p", Index: dir, TeacherModels: []string{"m"}}, "teacher model needs a BEIR dataset"},
		{Config{Output: "o", Dataset: dir, Mode: engine.ModeRerank, Teacher: TeacherFusion}, "lexical, dense or hybrid"},
		{Config{Output: "o", Dataset: dir, Teacher: TeacherCrossEncoder}, "needs a reranker"},
		{Config{Output: "o", Dataset: dir, Teacher: "oracle"}, `teacher "oracle"`},
	} {
		st, err := Mine(context.Background(), c.cfg)
		if st != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}
