package benchmarks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/eval/retrieval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// choiceSets are the shared retrieval sets BenchmarkModelChoice measures
// on, smallest first (so a run stopped part way has whole sets), with the
// split annactl eval reads.
var choiceSets = []struct{ name, split string }{
	{"xquad-en", "test"}, {"squad2-dev-half", "dev"}, {"cisi", "test"}, {"cranfield", "test"}, {"cacm", "test"}, {"scifact", "test"},
}

// choiceModels are the catalogue encoders BenchmarkModelChoice compares,
// each in float32 and int8.
var choiceModels = []string{"all-MiniLM-L6-v2", "bge-small-en-v1.5", "e5-small-v2"}

// choiceBase is the form the cost rule is measured against, and
// choiceCostCap the rule: the default is the form with the best average
// hybrid nDCG@10 whose indexing CPU per document is at most choiceCostCap
// times choiceBase's (issue 64).
const (
	choiceBase    = "all-MiniLM-L6-v2-int8"
	choiceCostCap = 2.5
)

// choiceRow is one form on one set: what BenchmarkModelChoice appends to
// its results file.
type choiceRow struct {
	Form        string             `json:"form"` // the installed name: NAME or NAME-int8 (or an ANNA_MODELS_EXTRA name)
	Fingerprint string             `json:"fingerprint"`
	Set         string             `json:"set"`
	Split       string             `json:"split"`
	Docs        int                `json:"docs"`
	Queries     int                `json:"queries"`
	Tokens      int64              `json:"tokens"`     // tokens the encoder ran over while indexing (passages, special tokens)
	IndexCPU    float64            `json:"index_cpu"`  // CPU seconds of this process while indexing (embedding, BM25, HNSW)
	IndexWall   float64            `json:"index_wall"` // seconds
	NDCG10      map[string]float64 `json:"ndcg10"`     // per mode: lexical, dense, hybrid
	Recall100   map[string]float64 `json:"recall100"`
	When        string             `json:"when"`
	GOMAXPROCS  int                `json:"gomaxprocs"`
	Build       string             `json:"build,omitempty"` // ANNA_MODELS_BUILD: the commit measured (scripts/models.sh sets it)
	Description string             `json:"description,omitempty"`
}

// BenchmarkModelChoice measures the catalogue's encoders — all-MiniLM-L6-v2,
// bge-small-en-v1.5 and e5-small-v2, each float32 and int8 as this build
// converts them (imported into a temporary directory from make setup's
// sources or the catalogue's downloads) — on every shared retrieval set
// (xquad-en, squad2-dev-half, cisi, cranfield, cacm, scifact) as `annactl
// eval` measures a BEIR folder: the engine's defaults (chunking, RRF), the
// corpus indexed by ingest.Slice in batches of 512, every judged query
// searched in modes lexical, dense and hybrid, BEIR's identical-ID rule.
// Per form and set: nDCG@10 and Recall@100 per mode, and the CPU seconds
// this process spent indexing (embedding, BM25, HNSW) — CPU rather than
// wall time, which other processes on a shared machine move. Each row is
// appended to ANNA_MODELS_OUT (JSON lines; default a file in the test's
// temporary directory) as it finishes, and rows already there (same form,
// fingerprint and set) are not measured again, so a run that stops part
// way resumes, and runs started side by side (ANNA_MODELS_SETS) share the
// file. ANNA_MODELS_EXTRA=NAME=DIR[,NAME=DIR] adds model
// directories as more forms (an int8 model converted before issue 64, to
// compare with; shown, never chosen); ANNA_MODELS_SETS=SET[,SET] measures
// those sets only, ANNA_MODELS_FORMS=FORM[,FORM] those forms only, in that
// order (two runs of one set side by side, each on its forms);
// ANNA_MODELS_TABLE_ONLY=1 measures nothing and prints the
// tables of the file's rows (Markdown, on standard output). At the end the
// tables of every row in the file and the choice: the catalogue form with
// the best average hybrid nDCG@10 over the sets every catalogue form has,
// among those whose CPU per document (over those sets) is within 2.5×
// all-MiniLM-L6-v2-int8's.
//
// Hours on a shared 2-core machine: scripts/models.sh runs it under nice.
//
//	ANNA_MODELS_OUT=docs/results/models.jsonl go test ./benchmarks -run '^$' -bench ModelChoice -benchtime 1x -timeout 0
func BenchmarkModelChoice(b *testing.B) {
	out := os.Getenv("ANNA_MODELS_OUT")
	if out == "" {
		out = filepath.Join(b.TempDir(), "models.jsonl")
	}
	if os.Getenv("ANNA_MODELS_TABLE_ONLY") != "" {
		fmt.Println(choiceTable(readChoiceRows(b, out)))
		return
	}
	for range b.N {
		forms := choiceForms(b)
		if pick := os.Getenv("ANNA_MODELS_FORMS"); pick != "" {
			var picked []choiceForm
			for _, name := range strings.Split(pick, ",") {
				i := slices.IndexFunc(forms, func(f choiceForm) bool { return f.name == name })
				if i < 0 {
					b.Fatalf("ANNA_MODELS_FORMS: no form %q", name)
				}
				picked = append(picked, forms[i])
			}
			forms = picked
		}
		// done reads the file again each time: another run may be writing
		// it (one per set, say), and a row it wrote need not be measured
		// twice.
		done := func(form, fp, set string) bool {
			for _, r := range readChoiceRows(b, out) {
				if r.Form == form && r.Fingerprint == fp && r.Set == set {
					return true
				}
			}
			return false
		}
		only := map[string]bool{}
		for _, s := range strings.Split(os.Getenv("ANNA_MODELS_SETS"), ",") {
			if s != "" {
				only[s] = true
			}
		}
		for _, set := range choiceSets {
			if len(only) > 0 && !only[set.name] {
				continue
			}
			dir := shareddata.Path(b, "datasets", set.name)
			ds, err := beir.Load(dir, set.split)
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range forms {
				man, err := model.LoadManifest(f.dir)
				if err != nil {
					b.Fatal(err)
				}
				if done(f.name, man.Fingerprint, set.name) {
					continue
				}
				r := measureChoice(b, f.name, f.dir, set.name, set.split, ds)
				r.Fingerprint, r.Build = man.Fingerprint, os.Getenv("ANNA_MODELS_BUILD")
				appendChoiceRow(b, out, r)
				b.Logf("%-28s %-16s hybrid %.4f dense %.4f lexical %.4f; %.4f CPU-s/doc (%d docs, %.0f tokens/doc)", r.Form, r.Set,
					r.NDCG10["hybrid"], r.NDCG10["dense"], r.NDCG10["lexical"], r.IndexCPU/float64(r.Docs), r.Docs, float64(r.Tokens)/float64(r.Docs))
			}
		}
		b.Logf("results: %s\n%s", out, choiceTable(readChoiceRows(b, out)))
	}
}

type choiceForm struct{ name, dir string }

// choiceForms imports every choiceModels entry in float32 and int8 into a
// temporary directory, and adds ANNA_MODELS_EXTRA's directories.
func choiceForms(b *testing.B) []choiceForm {
	b.Helper()
	ctx := context.Background()
	tmp := b.TempDir()
	var forms []choiceForm
	for _, name := range choiceModels {
		e, err := catalog.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range []string{"", model.QuantizeInt8} {
			o := catalog.Options{ModelsDir: tmp, DownloadsDir: home.DownloadsDir(), Quantize: q}
			if src := catalog.SourceDir(home.SourceDir(), e); dirHas(src, e.Members()) {
				_, err = catalog.Import(ctx, e, src, o)
			} else {
				_, err = catalog.Install(ctx, e, o)
			}
			if err != nil {
				b.Fatal(err)
			}
			n := catalog.InstalledName(e, q)
			forms = append(forms, choiceForm{n, filepath.Join(tmp, n)})
		}
	}
	if extra := os.Getenv("ANNA_MODELS_EXTRA"); extra != "" {
		for _, kv := range strings.Split(extra, ",") {
			name, dir, ok := strings.Cut(kv, "=")
			if !ok {
				b.Fatalf("ANNA_MODELS_EXTRA: %q is not NAME=DIR", kv)
			}
			forms = append(forms, choiceForm{name, dir})
		}
	}
	return forms
}

// dirHas reports whether dir holds every file of members' values.
func dirHas(dir string, members map[string]string) bool {
	for _, n := range members {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// measureChoice indexes ds with the model in dir into a temporary
// directory and evaluates it as annactl eval does.
func measureChoice(b *testing.B, form, dir, set, split string, ds *beir.Dataset) choiceRow {
	b.Helper()
	ctx := context.Background()
	enc, err := encoder.Load(ctx, dir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	idx := b.TempDir()
	eng, err := engine.Open(ctx, idx, engine.Options{Encoder: enc, Model: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	c0, t0 := cpuTime(b), time.Now()
	if _, err := ingest.Slice(ctx, eng, ds.Corpus, ingest.Options{Batch: 512}); err != nil {
		b.Fatal(err)
	}
	if err := eng.Flush(); err != nil {
		b.Fatal(err)
	}
	r := choiceRow{Form: form, Set: set, Split: split, Docs: len(ds.Corpus), Tokens: enc.Stats().Tokens,
		IndexCPU: (cpuTime(b) - c0).Seconds(), IndexWall: time.Since(t0).Seconds(),
		NDCG10: map[string]float64{}, Recall100: map[string]float64{}, When: time.Now().UTC().Format(time.RFC3339), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	qids := retrieval.JudgedQueries(ds)
	r.Queries = len(qids)
	isQuery := retrieval.IsQueryDoc(ds)
	modes, err := retrieval.SelectModes("lexical,dense,hybrid", false)
	if err != nil {
		b.Fatal(err)
	}
	rows, err := retrieval.Evaluate(ctx, eng, ds, qids, modes, retrieval.Options{
		Finish: func(_ retrieval.Mode, run eval.Run) error { run.DropIdentical(isQuery); return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, row := range rows {
		r.NDCG10[row.Mode.Key], r.Recall100[row.Mode.Key] = row.Scores.NDCG10, row.Scores.Recall100
	}
	return r
}

func readChoiceRows(b *testing.B, path string) []choiceRow {
	b.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var rows []choiceRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r choiceRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			b.Fatalf("%s:%d: %v", path, n, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return rows
}

func appendChoiceRow(b *testing.B, path string, r choiceRow) {
	b.Helper()
	line, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// choiceCandidates are the forms the choice is made among: choiceModels'
// entries in float32 and int8 (not ANNA_MODELS_EXTRA's forms).
func choiceCandidates() []string {
	var c []string
	for _, m := range choiceModels {
		c = append(c, m, m+"-int8")
	}
	return c
}

// choiceFusionSlack is how far hybrid may fall below the better of its two
// lists (issue 64, item 5).
const choiceFusionSlack = 0.005

// choiceTable is the Markdown of rows (the last row of each form and set):
// the averages and the choice over the sets every candidate form was
// measured on, then every form and set (nDCG@10 and Recall@100 per mode,
// CPU per document), then hybrid against the better of its two lists.
func choiceTable(rows []choiceRow) string {
	last := map[string]map[string]choiceRow{} // form → set → row
	var forms []string
	for _, r := range rows {
		if last[r.Form] == nil {
			last[r.Form] = map[string]choiceRow{}
			forms = append(forms, r.Form)
		}
		last[r.Form][r.Set] = r
	}
	candidate := map[string]bool{}
	for _, f := range choiceCandidates() {
		candidate[f] = true
	}
	var sets, partial []string
	for _, s := range choiceSets {
		all, some := true, false
		for _, f := range choiceCandidates() {
			if _, ok := last[f][s.name]; ok {
				some = true
			} else {
				all = false
			}
		}
		switch {
		case all:
			sets = append(sets, s.name)
		case some:
			partial = append(partial, s.name)
		}
	}
	var sb strings.Builder
	if len(sets) == 0 {
		sb.WriteString("(no set measured with every catalogue form yet)\n")
	} else {
		choiceSummary(&sb, forms, sets, last, candidate)
	}
	if len(partial) > 0 {
		fmt.Fprintf(&sb, "\nmeasured with some catalogue forms only (not in the averages): %s\n", strings.Join(partial, ", "))
		// The same over every set measured, for the forms measured on all
		// of them: what the choice would be if the missing ones could not
		// win.
		var every []string
		for _, s := range choiceSets {
			if slices.Contains(sets, s.name) || slices.Contains(partial, s.name) {
				every = append(every, s.name)
			}
		}
		sb.WriteString("\nthe forms measured on every one of those sets too (a form missing from this table lacks one):\n\n")
		choiceSummary(&sb, forms, every, last, candidate)
	}
	sb.WriteString("\n| set | form | nDCG@10 lexical | dense | hybrid | R@100 lexical | dense | hybrid | CPU-ms/doc | tokens/doc |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range choiceSets {
		for _, f := range forms {
			r, ok := last[f][s.name]
			if !ok {
				continue
			}
			fmt.Fprintf(&sb, "| %s | %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.1f | %.0f |\n", s.name, f,
				r.NDCG10["lexical"], r.NDCG10["dense"], r.NDCG10["hybrid"], r.Recall100["lexical"], r.Recall100["dense"], r.Recall100["hybrid"],
				1000*r.IndexCPU/float64(r.Docs), float64(r.Tokens)/float64(r.Docs))
		}
	}
	fmt.Fprintf(&sb, "\n| set | form | hybrid − max(lexical, dense) | within %.3f |\n|---|---|---|---|\n", choiceFusionSlack)
	for _, s := range choiceSets {
		for _, f := range forms {
			r, ok := last[f][s.name]
			if !ok {
				continue
			}
			d := r.NDCG10["hybrid"] - max(r.NDCG10["lexical"], r.NDCG10["dense"])
			ok = d >= -choiceFusionSlack
			mark := "yes"
			if !ok {
				mark = "**no**"
			}
			fmt.Fprintf(&sb, "| %s | %s | %+.4f | %s |\n", s.name, f, d, mark)
		}
	}
	return sb.String()
}

// choiceSummary writes the averages over sets of every form and the choice
// among the candidate forms.
func choiceSummary(sb *strings.Builder, forms, sets []string, last map[string]map[string]choiceRow, candidate map[string]bool) {
	type sum struct {
		hybrid, dense, lexical, recall, cpu float64
		docs                                int
		n                                   int
	}
	sums := map[string]*sum{}
	for _, f := range forms {
		s := &sum{}
		for _, set := range sets {
			r, ok := last[f][set]
			if !ok {
				continue
			}
			s.hybrid += r.NDCG10["hybrid"]
			s.dense += r.NDCG10["dense"]
			s.lexical += r.NDCG10["lexical"]
			s.recall += r.Recall100["hybrid"]
			s.cpu += r.IndexCPU
			s.docs += r.Docs
			s.n++
		}
		if s.n == len(sets) {
			k := float64(s.n)
			s.hybrid, s.dense, s.lexical, s.recall = s.hybrid/k, s.dense/k, s.lexical/k, s.recall/k
			sums[f] = s
		}
	}
	perDoc := func(f string) float64 { return sums[f].cpu / float64(sums[f].docs) }
	base, haveBase := sums[choiceBase]
	fmt.Fprintf(sb, "averages over %s (%d sets)\n\n| form | hybrid nDCG@10 | dense | lexical | hybrid R@100 | CPU-ms/doc | × %s | candidate |\n|---|---|---|---|---|---|---|---|\n",
		strings.Join(sets, ", "), len(sets), choiceBase)
	for _, f := range forms {
		s, ok := sums[f]
		if !ok {
			continue
		}
		ratio := "–"
		if haveBase {
			ratio = fmt.Sprintf("%.2f", perDoc(f)/(base.cpu/float64(base.docs)))
		}
		cand := "yes"
		if !candidate[f] {
			cand = "no"
		}
		fmt.Fprintf(sb, "| %s | **%.4f** | %.4f | %.4f | %.4f | %.1f | %s | %s |\n", f, s.hybrid, s.dense, s.lexical, s.recall, 1000*perDoc(f), ratio, cand)
	}
	if !haveBase {
		return
	}
	var cand []string
	for _, f := range forms {
		if candidate[f] && sums[f] != nil {
			cand = append(cand, f)
		}
	}
	sort.SliceStable(cand, func(i, j int) bool { return sums[cand[i]].hybrid > sums[cand[j]].hybrid })
	sb.WriteString("\n")
	for _, f := range cand {
		if perDoc(f) <= choiceCostCap*base.cpu/float64(base.docs) {
			fmt.Fprintf(sb, "choice: %s — average hybrid nDCG@10 %.4f over %d sets, %.2f× %s's CPU per document (cap %.1f×)\n",
				f, sums[f].hybrid, len(sets), perDoc(f)/(base.cpu/float64(base.docs)), choiceBase, choiceCostCap)
			break
		}
		fmt.Fprintf(sb, "not %s: average hybrid %.4f, but %.2f× %s's CPU per document (cap %.1f×)\n", f, sums[f].hybrid, perDoc(f)/(base.cpu/float64(base.docs)), choiceBase, choiceCostCap)
	}
}

// TestChoiceTable checks the choice on made-up rows: a form outside the
// catalogue (ANNA_MODELS_EXTRA's) is shown but neither chosen nor allowed to
// narrow the sets, a set some catalogue form lacks stays out of the
// averages, the cost cap passes over a better but dearer form, and hybrid
// below its better list is marked.
func TestChoiceTable(t *testing.T) {
	row := func(form, set string, hybrid, cpu float64) choiceRow {
		return choiceRow{Form: form, Set: set, Docs: 100, IndexCPU: cpu,
			NDCG10: map[string]float64{"lexical": 0.5, "dense": 0.5, "hybrid": hybrid}, Recall100: map[string]float64{}}
	}
	var rows []choiceRow
	for _, set := range []string{"xquad-en", "cisi"} {
		for _, f := range choiceCandidates() {
			h, cpu := 0.55, 10.0
			switch f {
			case "e5-small-v2": // best, but 3x the base's CPU
				h, cpu = 0.70, 30
			case "bge-small-en-v1.5-int8": // best within the cap
				h, cpu = 0.60, 20
			}
			if f == choiceBase && set == "cisi" {
				h = 0.49 // 0.01 below its better list
			}
			rows = append(rows, row(f, set, h, cpu))
		}
	}
	rows = append(rows, row("extra-int8", "xquad-en", 0.99, 1)) // no cisi row: must not narrow the sets
	rows = append(rows, row("e5-small-v2", "scifact", 0.9, 1))  // a set one form has
	got := choiceTable(rows)
	for _, want := range []string{
		"averages over xquad-en, cisi (2 sets)",
		"not e5-small-v2: average hybrid 0.7000, but 3.00×",
		"choice: bge-small-en-v1.5-int8 — average hybrid nDCG@10 0.6000 over 2 sets, 2.00×",
		"not in the averages): scifact",
		"| cisi | all-MiniLM-L6-v2-int8 | -0.0100 | **no** |",
		"| xquad-en | extra-int8 | +0.4900 | yes |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "choice: extra") || strings.Contains(got, "| extra-int8 | **") {
		t.Errorf("a form outside the catalogue is averaged or chosen:\n%s", got)
	}
}
