package mining

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The child-process half of TestResumeAfterSIGKILL: when MINING_CHILD_OUT is
// set, the test binary mines the synthetic set into that file and exits.
func TestMain(m *testing.M) {
	if out := os.Getenv("MINING_CHILD_OUT"); out != "" {
		if err := childMine(out, os.Getenv("MINING_CHILD_PAIRS"), os.Getenv("MINING_CHILD_RESUME") == "1"); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	resumeDocs    = 300
	resumeQueries = 400
	resumeSeed    = 11
)

func resumeOptions(workers int) Options {
	opt := DefaultOptions()
	opt.Seed = 99
	opt.Workers = workers
	opt.CheckpointEvery = 7
	return opt
}

func childMine(out, pairs string, resume bool) error {
	c, _ := synthData(resumeDocs, resumeQueries, resumeSeed)
	c.delay = 3 * time.Millisecond // slow enough to be killed mid-run
	opt := resumeOptions(3)
	opt.Resume = resume
	m, err := New(c, overlapTeacher, c, opt)
	if err != nil {
		return err
	}
	src, err := OpenPairs(context.Background(), pairs, PromptDefaults{Instruction: "Find the document."})
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = m.Run(context.Background(), src, out)
	return err
}

func progressUnits(out string) int {
	b, err := os.ReadFile(ProgressPath(out))
	if err != nil {
		return 0
	}
	var ck checkpoint
	if json.Unmarshal(b, &ck) != nil {
		return 0
	}
	return ck.Units
}

// startChild runs the test binary as a miner and SIGKILLs it once the
// progress file says at least `after` units are done (after < 0: let it
// finish). It reports whether the child was killed before finishing.
func startChild(t *testing.T, out, pairs string, resume bool, after int) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MINING_CHILD_OUT="+out, "MINING_CHILD_PAIRS="+pairs, "MINING_CHILD_RESUME="+map[bool]string{true: "1"}[resume])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if after < 0 {
		if err := <-done; err != nil {
			t.Fatalf("child: %v: %s", err, stderr.String())
		}
		return false
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child: %v: %s", err, stderr.String())
			}
			return false // finished before we could kill it
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("child made no progress in 60s")
		case <-time.After(2 * time.Millisecond):
		}
		if progressUnits(out) >= after {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := <-done
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Logf("child ended with %v (finished before the kill?)", err)
				return false
			}
			return true
		}
	}
}

// Kill the miner (SIGKILL, no chance to clean up) twice mid-run, resume each
// time, and compare with an uninterrupted run: same bytes, same stats.
func TestResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	c, pairsText := synthData(resumeDocs, resumeQueries, resumeSeed)
	pairs := writeFile(t, "pairs.jsonl", pairsText)
	ref, refStats, err := mineWith(t, c, c, overlapTeacher, pairs, resumeOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	want := string(mustRead(t, ref))

	out := filepath.Join(t.TempDir(), "mined.jsonl")
	if !startChild(t, out, pairs, false, 60) {
		t.Fatal("first child finished before being killed: make it slower")
	}
	n1 := progressUnits(out)
	got1 := string(mustRead(t, out))
	if n1 >= resumeQueries || len(got1) >= len(want) {
		t.Fatalf("after the kill %d units / %d bytes are done: not a mid-run kill", n1, len(got1))
	}
	if !strings.HasPrefix(want, got1[:min(len(got1), int(mustCheckpoint(t, out).Bytes))]) {
		t.Fatal("checkpointed part of the killed run differs from the reference")
	}
	killed := startChild(t, out, pairs, true, n1+80)
	t.Logf("first kill at %d units; second child killed=%v at %d units", n1, killed, progressUnits(out))
	startChild(t, out, pairs, true, -1)
	if got := string(mustRead(t, out)); got != want {
		t.Fatalf("resumed output differs from the uninterrupted run (%d vs %d bytes)", len(got), len(want))
	}
	ck := mustCheckpoint(t, out)
	if !ck.Done || ck.Units != resumeQueries {
		t.Errorf("final progress: done=%v units=%d", ck.Done, ck.Units)
	}
	ck.Stats.Teacher = refStats.Teacher
	a, _ := json.Marshal(ck.Stats)
	refStats.PosScores.trim()
	refStats.NegScores.trim()
	b, _ := json.Marshal(refStats)
	if string(a) != string(b) {
		t.Errorf("resumed stats differ:\n%s\n%s", a, b)
	}
}

func mustCheckpoint(t *testing.T, out string) checkpoint {
	t.Helper()
	var ck checkpoint
	if err := json.Unmarshal(mustRead(t, ProgressPath(out)), &ck); err != nil {
		t.Fatal(err)
	}
	return ck
}

// Cancelling the context (Ctrl-C) stops at a unit boundary; --resume then
// completes the file exactly. Also: a torn last line (crash mid-write) is cut.
func TestResumeAfterCancel(t *testing.T) {
	c, pairs := synth(t, 200, 150, 21)
	ref, _, err := mineWith(t, c, c, overlapTeacher, pairs, resumeOptions(2))
	if err != nil {
		t.Fatal(err)
	}
	want := string(mustRead(t, ref))
	out := filepath.Join(t.TempDir(), "o.jsonl")
	run := func(resume bool, stopAt int) error {
		opt := resumeOptions(2)
		opt.Resume = resume
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opt.Progress = func(done, _ int) {
			if done == stopAt {
				cancel()
			}
		}
		m, err := New(c, overlapTeacher, c, opt)
		if err != nil {
			t.Fatal(err)
		}
		src, err := OpenPairs(ctx, pairs, PromptDefaults{Instruction: "Find the document."})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		_, err = m.Run(ctx, src, out)
		return err
	}
	if err := run(false, 50); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if n := progressUnits(out); n < 50 || n >= 150 {
		t.Fatalf("progress after cancel: %d units", n)
	}
	// Simulate a crash that left half a line after the checkpoint.
	f, _ := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"query":"torn`)
	f.Close()
	if err := run(true, -1); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, out)); got != want {
		t.Fatal("resumed output differs from the uninterrupted run")
	}
	// Resuming a finished file is a no-op; resuming with other settings is refused.
	if err := run(true, -1); err != nil {
		t.Fatal(err)
	}
	opt := resumeOptions(2)
	opt.Seed = 1
	opt.Resume = true
	m, _ := New(c, overlapTeacher, c, opt)
	src, _ := OpenPairs(context.Background(), pairs, PromptDefaults{Instruction: "Find the document."})
	defer src.Close()
	if _, err := m.Run(context.Background(), src, out); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("resume with another seed: %v", err)
	}
}

// TestResumeWithoutOutput: a kill after the fresh start's progress file but
// before the output exists (TestCrashMineResume hit it) resumes from
// nothing; an output missing after bytes were written is an error.
func TestResumeWithoutOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mined.jsonl")
	if err := writeProgress(progressPath(out), &checkpoint{Config: "c"}); err != nil {
		t.Fatal(err)
	}
	ck, f, err := openOutput(out, "c", true)
	if err != nil {
		t.Fatalf("resume with nothing written and no output: %v", err)
	}
	f.Close()
	if ck.Bytes != 0 || ck.Units != 0 {
		t.Errorf("checkpoint %+v, want nothing written", ck)
	}
	os.Remove(out)
	if err := writeProgress(progressPath(out), &checkpoint{Config: "c", Bytes: 10, Units: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openOutput(out, "c", true); err == nil || !strings.Contains(err.Error(), "10 bytes were written") {
		t.Errorf("output lost after writing: %v", err)
	}
}
