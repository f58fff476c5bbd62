package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
)

const crashBatch = 20

// TestCrashChild is the child half of TestCrashSafety: it indexes batches
// forever, printing "committed N" after each Add returns.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("ANNA_CRASH_CHILD")
	if dir == "" {
		t.Skip("child process of TestCrashSafety")
	}
	ctx := context.Background()
	e, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	start, _ := strconv.Atoi(os.Getenv("ANNA_CRASH_START"))
	for b := start; ; b++ {
		var docs []engine.Document
		for i := range crashBatch {
			docs = append(docs, doc(b*crashBatch+i))
		}
		if _, err := e.Add(ctx, docs); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("committed %d\n", b)
		if b%7 == 3 {
			e.Flush() // save the graph now and then, so both paths are exercised
		}
	}
}

// TestCrashSafety kills an indexing child with SIGKILL at random points,
// reopens the directory, and checks that every batch reported committed is
// searchable by BM25 and densely, and that no batch is half there.
func TestCrashSafety(t *testing.T) {
	if os.Getenv("ANNA_CRASH_CHILD") != "" {
		t.Skip()
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	committed := -1
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "ANNA_CRASH_CHILD="+dir, fmt.Sprintf("ANNA_CRASH_START=%d", committed+1))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for at least one commit, then kill at a random moment.
		deadline := time.After(time.Duration(50+rng.Intn(400)) * time.Millisecond)
		gotOne := false
	loop:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break loop
				}
				if strings.HasPrefix(l, "error") {
					t.Fatalf("round %d child: %s", round, l)
				}
				if n, err := strconv.Atoi(strings.TrimPrefix(l, "committed ")); err == nil {
					committed, gotOne = n, true
				}
			case <-deadline:
				if gotOne {
					cmd.Process.Signal(syscall.SIGKILL)
					for l := range lines { // drain what the child printed before dying
						if n, err := strconv.Atoi(strings.TrimPrefix(l, "committed ")); err == nil {
							committed = n
						}
					}
					break loop
				}
				deadline = time.After(20 * time.Millisecond)
			}
		}
		cmd.Wait()
		checkCrashState(t, dir, committed)
	}
}

func checkCrashState(t *testing.T, dir string, committed int) {
	t.Helper()
	ctx := context.Background()
	e := openT(t, dir, "fp-a")
	defer e.Close()
	st, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// Whole batches only: the reported ones, plus possibly the one in
	// flight when the child died (committed but not yet reported).
	if st.Documents%crashBatch != 0 || st.Documents < (committed+1)*crashBatch || st.Documents > (committed+2)*crashBatch {
		t.Fatalf("after kill with %d batches reported: %d documents stored", committed+1, st.Documents)
	}
	if st.LexicalDocs != uint64(st.Documents) || st.DenseDocs != st.Documents {
		t.Fatalf("indexes disagree with storage after reopen: %+v", st)
	}
	// Every reported batch searchable both ways (sample a few docs per batch).
	for b := 0; b <= committed; b++ {
		for _, i := range []int{0, crashBatch - 1} {
			n := b*crashBatch + i
			want := fmt.Sprintf("d%05d", n)
			for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense} {
				// BM25 by the doc's unique token; dense by its own text, whose
				// vector is exactly the stored one.
				q := fmt.Sprintf("tok%d", n)
				if m == engine.ModeDense {
					q = engine.EmbedText(doc(n))
				}
				// A wide beam: the point is presence in the graph, and
				// these near-duplicate test vectors are hard for HNSW.
				rs, err := e.Search(ctx, q, engine.SearchOptions{Mode: m, K: 3, EfSearch: 2000})
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, r := range rs {
					found = found || r.ID == want
				}
				if !found {
					t.Fatalf("batch %d reported committed, but %s not found by %s search", b, want, m)
				}
			}
		}
	}
}
