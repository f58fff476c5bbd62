package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestGraphCheckpoints: issue 59's sixth finding. The graph was saved
// only on a clean close, so a writer killed after weeks replayed weeks of
// changes on the next open ("HNSW: the graph is 1,479 changes behind
// anna.db"). It is now saved once its file lacks CheckpointChanges
// changes (or an eighth of its documents, if more): a writer killed after
// 2,000 changes with checkpoints every 300 leaves a graph at most
// 300 + one batch behind, which is what the next Open replays.
func TestGraphCheckpoints(t *testing.T) {
	dir := t.TempDir()
	c := startChildEnv(t, dir, "index", 2000, "ANNA_SHARE_CHECKPOINT=300")
	c.awaitLine(t, "done")
	if _, err := os.Stat(filepath.Join(dir, "dense.hnsw")); err != nil {
		t.Fatalf("after 2,000 changes the graph was never saved: %v", err)
	}
	c.cmd.Process.Kill() // a crash: no Close
	c.cmd.Wait()

	rep, err := engine.Check(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	behind := 0
	for _, p := range rep.Problems {
		if m := regexp.MustCompile(`(\d+) changes? behind`).FindStringSubmatch(p.What); m != nil {
			behind, _ = strconv.Atoi(m[1])
		} else {
			t.Errorf("after the crash: %s", p)
		}
	}
	bound := 300 + shareBatch
	if behind > bound {
		t.Errorf("after the crash the graph is %d changes behind, more than %d", behind, bound)
	}
	var logged []string
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc("fp-a"), Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, l := range logged {
		if m := regexp.MustCompile(`applied (\d+) changes it had missed`).FindStringSubmatch(l); m != nil && strings.HasPrefix(l, "dense") {
			replayed, _ = strconv.Atoi(m[1])
		}
		if strings.Contains(l, "building it") || strings.Contains(l, "rebuilding") {
			t.Errorf("open after the crash rebuilt the graph: %s", l)
		}
	}
	if replayed != behind {
		t.Errorf("open replayed %d changes, check said %d behind", replayed, behind)
	}
	t.Logf("killed after 2,000 changes (checkpoints every 300): %d behind, replayed on open", behind)
	e.Close()
	mustCheckOK(t, dir)
}
