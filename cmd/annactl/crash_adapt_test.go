package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
)

// TestCrashAdapt (rows of docs/results/durability.md's crash table):
// `annactl adapt` killed with SIGKILL as each of its stages begins, and
// with SIGKILL and SIGINT at random points, then run again with the same
// command, ends with the index serving the very model an uninterrupted run
// serves (the same fingerprint: the same weights, byte for byte), and the
// index whole (check passes, every document kept). A tiny random student
// and a 30-document index: a run takes about a second.
func TestCrashAdapt(t *testing.T) {
	needModel(t)
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	start := testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
	ownHome(t)
	tmp := t.TempDir()
	base := filepath.Join(tmp, "base")
	mustRun(t, "index", "--index", base, writeCorpus(t, tmp, 30, 20, 4))
	want := storeDocs(t, base)
	args := func(dir string) []string {
		return []string{"adapt", "--index", dir, "--work", dir + ".work", "--base", start, "--steps", "6", "--batch", "2",
			"--group", "3", "--max-length", "32", "--lr", "0.001", "--min-gain", "-1"}
	}
	ref := copyDir(t, base, filepath.Join(tmp, "ref"))
	began := time.Now()
	cmd := child(args(ref)...)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("an uninterrupted adapt: %v\n%s", err, out.String())
	}
	full := time.Since(began)
	refModel, err := engine.RecordedModel(ref)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := engine.RecordedModel(base); refModel.Fingerprint == b.Fingerprint {
		t.Fatal("the uninterrupted run left the index on its model")
	}
	// The stages, as the progress lines name them: "[2/6] mine: ...".
	stageLine := regexp.MustCompile(`^\[(\d+)/(\d+)\] ([a-z0-9 -]+)`)
	var stages []string
	for _, l := range strings.Split(out.String(), "\n") {
		if m := stageLine.FindStringSubmatch(l); m != nil && !slices.Contains(stages, m[0]) {
			stages = append(stages, m[0])
		}
	}
	if len(stages) < 4 {
		t.Fatalf("the progress named %d stages (%q); want queries to reindex:\n%s", len(stages), stages, out.String())
	}
	t.Logf("an uninterrupted adapt takes %s; stages %q", full.Round(time.Millisecond), stages)

	round := 0
	tallies := map[syscall.Signal]*crashTally{syscall.SIGKILL: {}, syscall.SIGINT: {}}
	// after stops (kill reports whether the child was stopped before it
	// finished) and then re-runs one copy of the index.
	after := func(sig syscall.Signal, kill func(dir string) bool) {
		t.Helper()
		dir := copyDir(t, base, filepath.Join(tmp, fmt.Sprintf("r%d", round)))
		round++
		tally := tallies[sig]
		tally.rounds++
		if kill(dir) {
			tally.killedMidway++
		} else {
			tally.finished++
		}
		if r := annactl(t, "", args(dir)...); r.code != 0 {
			t.Fatalf("round %d: the re-run failed: %s", round, r)
		}
		m, err := engine.RecordedModel(dir)
		if err != nil || m.Fingerprint != refModel.Fingerprint {
			tally.checksFailed++
			t.Errorf("round %d: the index serves %s (%v) after the re-run; the uninterrupted run serves %s", round, m.Fingerprint, err, refModel.Fingerprint)
		}
		got := storeDocs(t, dir)
		for id, v := range want {
			if got[id] != v {
				tally.lost++
			}
		}
		if !verifyDir(t, dir, len(want)) {
			tally.checksFailed++
		}
		os.RemoveAll(dir)
		os.RemoveAll(dir + ".work")
	}
	for _, stage := range stages {
		after(syscall.SIGKILL, func(dir string) bool { return killOnLine(t, stage, args(dir)...) })
	}
	rng := rand.New(rand.NewSource(5))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		for range 2 {
			delay := time.Duration(rng.Int63n(int64(full)))
			after(sig, func(dir string) bool {
				code, stderr := killAt(t, sig, delay, args(dir)...)
				if sig == syscall.SIGINT && code != 130 && code != 0 {
					t.Errorf("SIGINT after %s gave exit %d: %s", delay, code, stderr)
				}
				return code != 0
			})
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Logf("adapt, %s: %s", sig, tallies[sig])
		recordCrash(t, "adapt", sig, *tallies[sig])
	}
}

// killOnLine starts a child and kills it (SIGKILL) when its stderr prints
// a line starting with prefix; it reports whether the child was killed
// (false: it finished without printing one).
func killOnLine(t *testing.T, prefix string, args ...string) bool {
	t.Helper()
	cmd := child(args...)
	cmd.Stdout = io.Discard
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		if !killed && strings.HasPrefix(sc.Text(), prefix) {
			cmd.Process.Kill()
			killed = true
		}
	}
	cmd.Wait()
	return killed && !cmd.ProcessState.Success()
}
