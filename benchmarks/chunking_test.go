package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/eval"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/fusion"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/tokenizer"
)

// chunkRule scores a document from its truncated vector's cosine t and its
// passages' cosines s (s[0] the first window; one passage when the
// document fits the window, then s[0] == t).
type chunkRule struct {
	name  string
	score func(t float32, s []float32) float32
}

func bestOf(s []float32) float32 {
	b := s[0]
	for _, v := range s[1:] {
		b = max(b, v)
	}
	return b
}

// chunkRules are the aggregations BenchmarkChunkingRules compares, all
// from the same vectors.
func chunkRules() []chunkRule {
	rules := []chunkRule{
		{"truncate (--no-chunking)", func(t float32, _ []float32) float32 { return t }},
		{"max-passage (default before)", func(_ float32, s []float32) float32 { return bestOf(s) }},
		{"first passage only", func(_ float32, s []float32) float32 { return s[0] }},
	}
	for _, m := range []int{3, 4, 5} {
		rules = append(rules, chunkRule{fmt.Sprintf("max-passage only from %d passages", m), func(t float32, s []float32) float32 {
			if len(s) < m {
				return t
			}
			return bestOf(s)
		}})
	}
	for _, d := range []float32{0.01, 0.02, 0.03, 0.05} {
		rules = append(rules, chunkRule{fmt.Sprintf("max(first, best-%.2f)", d), func(_ float32, s []float32) float32 {
			return max(s[0], bestOf(s)-d)
		}})
	}
	for _, a := range []float32{0.1, 0.2, 0.25, 0.33, 0.5} {
		rules = append(rules, chunkRule{fmt.Sprintf("%.2f·first + %.2f·best", a, 1-a), func(_ float32, s []float32) float32 {
			return a*s[0] + (1-a)*bestOf(s)
		}})
	}
	for _, c := range []struct {
		a float32
		m int
	}{{0.2, 5}, {0.25, 5}, {0.2, 4}, {0.2, 6}} {
		rules = append(rules, chunkRule{fmt.Sprintf("%.2f·first + %.2f·best below %d passages, best from %d", c.a, 1-c.a, c.m, c.m), func(_ float32, s []float32) float32 {
			if len(s) >= c.m {
				return bestOf(s)
			}
			return c.a*s[0] + (1-c.a)*bestOf(s)
		}})
	}
	for _, c := range []float32{0.4, 0.5} {
		rules = append(rules, chunkRule{fmt.Sprintf("(%.1f/n)·first + (1 - %.1f/n)·best", c, c), func(_ float32, s []float32) float32 {
			a := c / float32(len(s))
			return a*s[0] + (1-a)*bestOf(s)
		}})
	}
	return rules
}

// shortFiller builds the "just over the window" set from SciFact's test
// split: the documents longSciFact keeps (every relevant abstract and the
// same 1,500 others), each its own abstract followed by the first words
// of an unrelated one (about 60-110 model tokens), so most are a little
// longer than MiniLM's 256-token window and the relevant text comes first.
func shortFiller(tb testing.TB) *beir.Dataset {
	ds, relevant := sciFactTest(tb)
	var filler, keep []beir.Doc
	for _, d := range ds.Corpus {
		if relevant[d.ID] {
			keep = append(keep, d)
		} else {
			filler = append(filler, d)
		}
	}
	rng := rand.New(rand.NewPCG(13, 17))
	others := append([]beir.Doc(nil), filler...)
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	keep = append(keep, others[:1500]...)
	sort.Slice(keep, func(i, j int) bool { return keep[i].ID < keep[j].ID })
	out := &beir.Dataset{Queries: ds.Queries, Qrels: ds.Qrels}
	for _, d := range keep {
		var f beir.Doc
		for f = filler[rng.IntN(len(filler))]; f.ID == d.ID; f = filler[rng.IntN(len(filler))] {
		}
		words := strings.Fields(f.Text)
		d.Text += " " + strings.Join(words[:min(len(words), 50+rng.IntN(40))], " ")
		out.Corpus = append(out.Corpus, d)
	}
	return out
}

// BenchmarkChunkingRules embeds each collection once (through the
// embedding cache: the truncated text and, for a document longer than the
// window, its passages as the engine cuts them by default) and scores every
// chunkRule by exact search over the same vectors: dense nDCG@10 per rule
// and collection. ANNA_CHUNK_SETS picks collections (comma-separated;
// default all: scifact,cranfield,cisi,cacm,long,justover). With
// ANNA_CHUNK_LEX a folder holding NAME.trec (the BM25 run of `annactl eval
// --modes lexical --run-out`), hybrid nDCG@10 too: RRF (k = 60) of that
// run's top 100 and each rule's dense top 100, as the engine fuses them.
// ANNA_CHUNK_DUMP, a folder: the built collections (long, justover) are
// written there as BEIR folders, for annactl eval.
//
//	go test -v ./benchmarks -run '^$' -bench ChunkingRules -benchtime 1x -timeout 90m
func BenchmarkChunkingRules(b *testing.B) {
	modelDir, err := home.RequireDefaultModel()
	if err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	base, err := encoder.Load(ctx, modelDir, encoder.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer base.Close()
	enc, err := encoder.NewCache(base, "")
	if err != nil {
		b.Fatal(err)
	}
	sp, ok := encoder.SplitterOf(enc)
	if !ok {
		b.Fatal("the default model cannot split")
	}
	tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	defer tok.Close()
	sets := []string{"scifact", "cranfield", "cisi", "cacm", "long", "justover"}
	if s := os.Getenv("ANNA_CHUNK_SETS"); s != "" {
		sets = strings.Split(s, ",")
	}
	rules := chunkRules()
	table, htable := map[string][]float64{}, map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for _, name := range sets {
			var ds *beir.Dataset
			switch name {
			case "long":
				ds, _ = longSciFact(b, tok.Count, 300)
			case "justover":
				ds = shortFiller(b)
			default:
				ds, err = beir.Load(shareddata.Path(b, "datasets", name), "test")
				if err != nil {
					b.Fatal(err)
				}
			}
			if dir := os.Getenv("ANNA_CHUNK_DUMP"); dir != "" && (name == "long" || name == "justover") {
				dumpBEIR(b, filepath.Join(dir, name), ds)
			}
			table[name], htable[name] = chunkRulesOn(ctx, b, enc, sp, ds, name, rules)
		}
	}
	for _, t := range []struct {
		what  string
		table map[string][]float64
	}{{"dense", table}, {"hybrid", htable}} {
		var sb strings.Builder
		fmt.Fprintf(&sb, "\n%s nDCG@10 (against truncation)\n| rule | %s |\n|---|%s\n", t.what, strings.Join(sets, " | "), strings.Repeat("---|", len(sets)))
		for r, rule := range rules {
			fmt.Fprintf(&sb, "| %s |", rule.name)
			for _, s := range sets {
				if t.table[s] == nil {
					sb.WriteString(" – |")
					continue
				}
				fmt.Fprintf(&sb, " %.4f (%+.4f) |", t.table[s][r], t.table[s][r]-t.table[s][0])
			}
			sb.WriteString("\n")
		}
		b.Log(sb.String())
	}
}

// dumpBEIR writes ds as a BEIR folder (split test).
func dumpBEIR(b *testing.B, dir string, ds *beir.Dataset) {
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		b.Fatal(err)
	}
	var corpus, queries, qrels strings.Builder
	for _, d := range ds.Corpus {
		line, _ := json.Marshal(map[string]string{"_id": d.ID, "title": d.Title, "text": d.Text})
		corpus.Write(append(line, '\n'))
	}
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for q, rels := range ds.Qrels {
		line, _ := json.Marshal(map[string]string{"_id": q, "text": ds.Queries[q]})
		queries.Write(append(line, '\n'))
		for id, g := range rels {
			fmt.Fprintf(&qrels, "%s\t%s\t%d\n", q, id, g)
		}
	}
	for name, text := range map[string]string{"corpus.jsonl": corpus.String(), "queries.jsonl": queries.String(), "qrels/test.tsv": qrels.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// lexRun reads ANNA_CHUNK_LEX/name.trec, or returns nil.
func lexRun(b *testing.B, name string) eval.Run {
	dir := os.Getenv("ANNA_CHUNK_LEX")
	if dir == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, name+".trec"))
	if err != nil {
		b.Logf("%s: no BM25 run (%v): dense only", name, err)
		return nil
	}
	defer f.Close()
	run, err := eval.ReadTREC(f, f.Name())
	if err != nil {
		b.Fatal(err)
	}
	return run
}

func chunkRulesOn(ctx context.Context, b *testing.B, enc encoder.Encoder, sp encoder.Splitter, ds *beir.Dataset, name string, rules []chunkRule) (dense, hybrid []float64) {
	w, s := sp.MaxLength(), max(1, sp.MaxLength()/2) // engine.Chunking{}'s windows
	var texts []string
	trunc := make([]int, len(ds.Corpus))
	first := make([]int, len(ds.Corpus)+1) // passages of doc i: texts[first[i]:first[i+1]]
	split, passages := 0, 0
	for i, d := range ds.Corpus {
		first[i] = len(texts)
		var ps []encoder.Passage
		if d.Text != "" {
			prefix := ""
			if d.Title != "" {
				prefix = d.Title + " "
			}
			ps = sp.Split(prefix, d.Text, w, s)
		}
		if len(ps) <= 1 {
			texts = append(texts, engine.EmbedText(engine.Document{ID: d.ID, Title: d.Title, Text: d.Text}))
			trunc[i] = first[i]
			continue
		}
		split++
		for _, p := range ps {
			texts = append(texts, p.Text)
		}
	}
	first[len(ds.Corpus)] = len(texts)
	passages = len(texts)
	// The truncated vectors of the split documents come after the passages.
	for i, d := range ds.Corpus {
		if first[i+1]-first[i] > 1 {
			trunc[i] = len(texts)
			texts = append(texts, engine.EmbedText(engine.Document{ID: d.ID, Title: d.Title, Text: d.Text}))
		}
	}
	var vecs [][]float32
	for start := 0; start < len(texts); start += 512 {
		got, err := enc.EmbedDocuments(ctx, texts[start:min(start+512, len(texts))])
		if err != nil {
			b.Fatal(err)
		}
		vecs = append(vecs, got...)
	}
	for _, v := range vecs {
		normalize(v)
	}
	qids := make([]string, 0, len(ds.Qrels))
	for q := range ds.Qrels {
		qids = append(qids, q)
	}
	sort.Strings(qids)
	qtexts := make([]string, len(qids))
	for i, q := range qids {
		qtexts[i] = ds.Queries[q]
	}
	qvecs, err := enc.EmbedQueries(ctx, qtexts, encoder.Prompt{})
	if err != nil {
		b.Fatal(err)
	}
	runs := make([]map[string][]string, len(rules))
	hruns := make([]map[string][]string, len(rules))
	for r := range runs {
		runs[r], hruns[r] = map[string][]string{}, map[string][]string{}
	}
	lex := lexRun(b, name)
	cos := make([]float32, len(vecs))
	scores := make([]float32, len(ds.Corpus))
	order := make([]int, len(ds.Corpus))
	for qi, q := range qids {
		qv := qvecs[qi]
		normalize(qv)
		for j, v := range vecs {
			cos[j] = dot(qv, v)
		}
		for r, rule := range rules {
			for i := range ds.Corpus {
				scores[i] = rule.score(cos[trunc[i]], cos[first[i]:first[i+1]])
				order[i] = i
			}
			sort.Slice(order, func(x, y int) bool {
				if scores[order[x]] != scores[order[y]] {
					return scores[order[x]] > scores[order[y]]
				}
				return ds.Corpus[order[x]].ID < ds.Corpus[order[y]].ID
			})
			ids := make([]string, 0, 100)
			for _, i := range order[:min(100, len(order))] {
				ids = append(ids, ds.Corpus[i].ID)
			}
			runs[r][q] = ids
			if lex != nil {
				var lh, dh []fusion.Hit
				for _, h := range lex[q][:min(100, len(lex[q]))] {
					lh = append(lh, fusion.Hit{ID: h.ID, Score: h.Score})
				}
				for rank, id := range ids {
					dh = append(dh, fusion.Hit{ID: id, Score: -float64(rank)})
				}
				for _, f := range fusion.RRF([]fusion.List{{Name: "lexical", Hits: lh}, {Name: "dense", Hits: dh}}, 60) {
					hruns[r][q] = append(hruns[r][q], f.ID)
				}
			}
		}
	}
	dense = make([]float64, len(rules))
	if lex != nil {
		hybrid = make([]float64, len(rules))
		b.Logf("%s: BM25 run nDCG@10 %.4f", name, eval.Evaluate(lex.IDs(), ds.Qrels).NDCG10)
	}
	for r, rule := range rules {
		sc := eval.Evaluate(runs[r], ds.Qrels)
		dense[r] = sc.NDCG10
		b.Logf("%s: %s nDCG@10 %.4f R@100 %.4f", name, rule.name, sc.NDCG10, sc.Recall100)
		if lex != nil {
			hybrid[r] = eval.Evaluate(hruns[r], ds.Qrels).NDCG10
			b.Logf("%s: %s hybrid nDCG@10 %.4f", name, rule.name, hybrid[r])
		}
	}
	b.Logf("%s: %d documents, %d split (%.1f%%), %d passages, %d queries", name, len(ds.Corpus), split, 100*float64(split)/float64(len(ds.Corpus)), passages, len(qids))
	return dense, hybrid
}

func normalize(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
