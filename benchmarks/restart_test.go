package benchmarks

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// BenchmarkCrashRestart measures what a crash costs the next Open: the
// replay of the changes the dense graph's saved file lacks (issue 59's
// sixth finding), before and after the graph's checkpoints.
//
// For each size N, a child process opens an empty directory for writing
// (the deterministic hashing encoder of internal/encodertest, so that no
// model time is measured), adds N documents in batches of 1,000 and is
// killed (SIGKILL) once the last batch is acknowledged. Before checkpoints
// (Options.CheckpointChanges -1, the behaviour up to 92fc058) the graph of
// a writer that never closed was never saved: the next Open builds it
// from the N stored vectors (the same inserts as replaying N changes onto
// a saved graph). After (the default), the child saved the graph whenever
// its file lacked 10,000 changes or an eighth of its documents, and the
// next Open replays only what came after the last checkpoint. Both
// restarts run on the same killed directory: the "before" one on a copy
// without its graph file, opened with checkpoints off (so that it does
// not save the rebuilt graph either).
//
// Reported per size: the child's ingest time and the time its checkpoints
// took, the changes the "after" Open replayed (what the graph's file
// lacked at the crash), and each restart's Open time.
//
//	go test -v -run '^$' -bench 'CrashRestart$' -benchtime 1x -timeout 4h ./benchmarks/
//
// Environment: ANNA_RESTART_N (sizes, default "10000,1000000"),
// ANNA_RESTART_DIM (the encoder's dimension, default 384).
func BenchmarkCrashRestart(b *testing.B) {
	sizes := []int{10_000, 1_000_000}
	if s := os.Getenv("ANNA_RESTART_N"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("ANNA_RESTART_N %q", s)
			}
			sizes = append(sizes, n)
		}
	}
	dim := restartDim(b)
	for range b.N {
		for _, n := range sizes {
			dir := filepath.Join(b.TempDir(), "idx")
			ingest, checkpoints := restartChild(b, dir, n, dim)
			// Before: the same directory, its graph never saved.
			copyDir := filepath.Join(b.TempDir(), "before")
			if out, err := exec.Command("cp", "-a", dir, copyDir).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			os.Remove(filepath.Join(copyDir, "dense.hnsw"))
			before, rebuilt := timedOpen(b, copyDir, dim, -1)
			after, behind := timedOpen(b, dir, dim, 0)
			if rebuilt != -1 {
				b.Fatalf("the open without a graph file replayed %d changes instead of building the graph", rebuilt)
			}
			b.Logf("N %d (dim %d): ingest %.1f s, of which checkpoints %.1f s; restart before (the graph built from %d documents) %.2f s, after (%d changes replayed) %.2f s (%.1fx)",
				n, dim, ingest.Seconds(), checkpoints.Seconds(), n, before.Seconds(), behind, after.Seconds(), before.Seconds()/after.Seconds())
			b.ReportMetric(before.Seconds(), fmt.Sprintf("s_restart_before_%d", n))
			b.ReportMetric(after.Seconds(), fmt.Sprintf("s_restart_after_%d", n))
			b.ReportMetric(float64(behind), fmt.Sprintf("behind_%d", n))
			b.ReportMetric(checkpoints.Seconds(), fmt.Sprintf("s_checkpoints_%d", n))
			b.ReportMetric(ingest.Seconds(), fmt.Sprintf("s_ingest_%d", n))
			os.RemoveAll(copyDir)
			os.RemoveAll(dir)
		}
	}
}

func restartDim(tb testing.TB) int {
	dim := 384
	if s := os.Getenv("ANNA_RESTART_DIM"); s != "" {
		var err error
		if dim, err = strconv.Atoi(s); err != nil || dim <= 0 {
			tb.Fatalf("ANNA_RESTART_DIM %q", s)
		}
	}
	return dim
}

func restartEncoder(dim int) *encodertest.Hashing {
	return &encodertest.Hashing{D: dim, FP: "restart-bench"}
}

// restartDoc is document i: a unique word and a few of 1,000 shared ones.
func restartDoc(i int) engine.Document {
	return engine.Document{ID: fmt.Sprintf("d%07d", i), Title: fmt.Sprintf("document %d", i),
		Text: fmt.Sprintf("u%d w%d w%d w%d w%d", i, i%1000, (i*7)%1000, (i*13)%1000, (i*31)%1000)}
}

// TestCrashRestartChild is BenchmarkCrashRestart's writer: it adds
// ANNA_RESTART_N documents to ANNA_RESTART_CHILD, printing its log, then
// "done SECONDS", and waits to be killed.
func TestCrashRestartChild(t *testing.T) {
	dir := os.Getenv("ANNA_RESTART_CHILD")
	if dir == "" {
		t.Skip("the writer of BenchmarkCrashRestart")
	}
	n, _ := strconv.Atoi(os.Getenv("ANNA_RESTART_N"))
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: restartEncoder(restartDim(t)),
		Logf: func(f string, a ...any) { fmt.Printf("log: "+f+"\n", a...) }})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	start := time.Now()
	for from := 0; from < n; from += 1000 {
		docs := make([]engine.Document, 0, 1000)
		for i := from; i < min(n, from+1000); i++ {
			docs = append(docs, restartDoc(i))
		}
		if _, err := e.Add(context.Background(), docs); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
	}
	fmt.Printf("done %f\n", time.Since(start).Seconds())
	time.Sleep(time.Hour) // killed here
}

// restartChild runs the writer on dir and kills it once it is done; it
// returns the ingest time and the time its checkpoints took.
func restartChild(tb testing.TB, dir string, n, dim int) (ingest, checkpoints time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRestartChild$", "-test.v=false", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "ANNA_RESTART_CHILD="+dir, fmt.Sprintf("ANNA_RESTART_N=%d", n), fmt.Sprintf("ANNA_RESTART_DIM=%d", dim))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ckpt := regexp.MustCompile(`checkpoint after \d+ changes \(\d+ documents\) in (\S+)`)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if m := ckpt.FindStringSubmatch(line); m != nil {
			d, _ := time.ParseDuration(m[1])
			checkpoints += d
		}
		if s, ok := strings.CutPrefix(line, "done "); ok {
			secs, _ := strconv.ParseFloat(s, 64)
			cmd.Process.Kill() // the crash
			go io.Copy(io.Discard, out)
			return time.Duration(secs * float64(time.Second)), checkpoints
		}
		if strings.HasPrefix(line, "error") {
			tb.Fatalf("writer: %s", line)
		}
	}
	tb.Fatalf("the writer exited before it was done")
	return 0, 0
}

// timedOpen is the time engine.Open of dir takes (the restart), with
// Options.CheckpointChanges every, and the changes it replayed onto the
// saved graph (-1: it built the graph instead).
func timedOpen(tb testing.TB, dir string, dim, every int) (time.Duration, int) {
	replayed := 0
	applied := regexp.MustCompile(`^dense graph: applied (\d+) changes it had missed`)
	logf := func(f string, a ...any) {
		line := fmt.Sprintf(f, a...)
		if m := applied.FindStringSubmatch(line); m != nil {
			replayed, _ = strconv.Atoi(m[1])
		}
		if strings.HasPrefix(line, "dense graph: built from") {
			replayed = -1
		}
	}
	start := time.Now()
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: restartEncoder(dim), CheckpointChanges: every, Logf: logf})
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Close(); err != nil {
		tb.Fatal(err)
	}
	return took, replayed
}
