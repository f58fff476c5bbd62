// LuceneBM25 is the Lucene reference of BenchmarkLexicalSearch100k
// (benchmarks/lexical_test.go), run by scripts/lucene-bm25.sh: the same
// documents and queries, already analysed by anna's analyzer (Bleve's "en")
// and written as space-separated terms, so that both engines hold the same
// terms with the same counts and only the postings and their search differ.
//
// Index: fields title and text, each term as written (WhitespaceAnalyzer),
// BM25Similarity(k1 1.2, b 0.75), Lucene's default codec and merge policy
// (block-max impacts in the postings). Query: anna's best_fields, per field
// a disjunction of the query's terms (a repeated term repeated), then
// DisjunctionMaxQuery over the two fields with tie breaker 0.5. Top k with
// TopScoreDocCollector and a total-hits threshold of k, so Lucene may skip
// (block-max WAND/MaxScore) as it does by default for a top-k search.
//
//	java -cp CLASSPATH LuceneBM25 index CORPUS INDEX_DIR
//	java -cp CLASSPATH LuceneBM25 search INDEX_DIR QUERIES [TOP10]
//
// CORPUS: lines "id<TAB>title terms<TAB>text terms"; QUERIES: one query's
// terms a line. search times every query at top 100 on one thread, on two
// (an executor of two threads: Lucene's intra-query concurrency over
// segment slices) and at top 10 on one, and, for context, at top 100 on
// one thread as a single disjunction over both fields' terms (sum_: the
// fields' scores summed, not anna's function, but the form Lucene prunes
// best: DisjunctionMaxQuery with a tie breaker above 0 skips by block
// bounds but does not pass its minimum competitive score down to its
// clauses), in turn, after two untimed passes
// over all queries for the JIT, and prints one line of key=value pairs;
// with TOP10 it also writes each query's 10 best IDs there, a line a query
// (for the benchmark to compare with anna's hits).
import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import org.apache.lucene.analysis.core.WhitespaceAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.DisjunctionMaxQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopScoreDocCollector;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.FSDirectory;

public class LuceneBM25 {
	public static void main(String[] args) throws Exception {
		if (args.length == 3 && args[0].equals("index")) {
			index(Paths.get(args[1]), Paths.get(args[2]));
		} else if ((args.length == 3 || args.length == 4) && args[0].equals("search")) {
			search(Paths.get(args[1]), Paths.get(args[2]), args.length == 4 ? Paths.get(args[3]) : null);
		} else {
			System.err.println("usage: LuceneBM25 index CORPUS INDEX_DIR | search INDEX_DIR QUERIES [TOP10]");
			System.exit(2);
		}
	}

	static void index(Path corpus, Path dir) throws Exception {
		long t0 = System.nanoTime();
		IndexWriterConfig cfg = new IndexWriterConfig(new WhitespaceAnalyzer());
		cfg.setSimilarity(new BM25Similarity(1.2f, 0.75f));
		cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
		long n = 0;
		try (IndexWriter w = new IndexWriter(FSDirectory.open(dir), cfg);
				BufferedReader r = Files.newBufferedReader(corpus, StandardCharsets.UTF_8)) {
			for (String line; (line = r.readLine()) != null;) {
				String[] f = line.split("\t", -1);
				if (f.length != 3) {
					throw new IllegalArgumentException(corpus + ": line " + (n + 1) + ": want id, title, text");
				}
				Document d = new Document();
				d.add(new StringField("id", f[0], Field.Store.YES));
				d.add(new TextField("title", f[1], Field.Store.NO));
				d.add(new TextField("text", f[2], Field.Store.NO));
				w.addDocument(d);
				n++;
			}
			w.commit();
		}
		System.out.printf("indexed=%d index_s=%.1f%n", n, (System.nanoTime() - t0) / 1e9);
	}

	static Query query(String terms) {
		List<Query> fields = new ArrayList<>();
		for (String field : new String[] {"title", "text"}) {
			BooleanQuery.Builder b = new BooleanQuery.Builder();
			for (String t : terms.trim().split(" +")) {
				if (!t.isEmpty()) {
					b.add(new TermQuery(new Term(field, t)), BooleanClause.Occur.SHOULD);
				}
			}
			fields.add(b.build());
		}
		return new DisjunctionMaxQuery(fields, 0.5f);
	}

	// sumQuery is one disjunction of the query's terms in both fields.
	static Query sumQuery(String terms) {
		BooleanQuery.Builder b = new BooleanQuery.Builder();
		for (String field : new String[] {"title", "text"}) {
			for (String t : terms.trim().split(" +")) {
				if (!t.isEmpty()) {
					b.add(new TermQuery(new Term(field, t)), BooleanClause.Occur.SHOULD);
				}
			}
		}
		return b.build();
	}

	static void search(Path dir, Path queries, Path top10) throws Exception {
		List<Query> qs = new ArrayList<>(), sums = new ArrayList<>();
		for (String line : Files.readAllLines(queries, StandardCharsets.UTF_8)) {
			qs.add(query(line));
			sums.add(sumQuery(line));
		}
		ExecutorService pool = Executors.newFixedThreadPool(2);
		try (DirectoryReader reader = DirectoryReader.open(FSDirectory.open(dir))) {
			IndexSearcher one = new IndexSearcher(reader);
			IndexSearcher two = new IndexSearcher(reader, pool);
			for (IndexSearcher s : new IndexSearcher[] {one, two}) {
				s.setSimilarity(new BM25Similarity(1.2f, 0.75f));
			}
			for (int pass = 0; pass < 2; pass++) { // the JIT's warm-up
				for (int i = 0; i < qs.size(); i++) {
					top(one, qs.get(i), 100);
					top(two, qs.get(i), 100);
					top(one, qs.get(i), 10);
					top(one, sums.get(i), 100);
				}
			}
			long[] t100 = new long[qs.size()], t100x2 = new long[qs.size()], t10 = new long[qs.size()], tsum = new long[qs.size()];
			for (int i = 0; i < qs.size(); i++) {
				long a = System.nanoTime();
				top(one, qs.get(i), 100);
				long b = System.nanoTime();
				top(two, qs.get(i), 100);
				long c = System.nanoTime();
				top(one, qs.get(i), 10);
				long d = System.nanoTime();
				top(one, sums.get(i), 100);
				tsum[i] = System.nanoTime() - d;
				t10[i] = d - c;
				t100x2[i] = c - b;
				t100[i] = b - a;
			}
			if (top10 != null) {
				List<String> lines = new ArrayList<>();
				for (Query q : qs) {
					StringBuilder sb = new StringBuilder();
					for (ScoreDoc d : one.search(q, TopScoreDocCollector.createSharedManager(10, null, 10)).scoreDocs) {
						sb.append(sb.length() > 0 ? " " : "").append(one.storedFields().document(d.doc).get("id"));
					}
					lines.add(sb.toString());
				}
				Files.write(top10, lines, StandardCharsets.UTF_8);
			}
			System.out.printf("docs=%d segments=%d queries=%d p50_ms=%.3f p99_ms=%.3f two_threads_p50_ms=%.3f two_threads_p99_ms=%.3f top10_p50_ms=%.3f sum_p50_ms=%.3f slices=%d%n",
					reader.numDocs(), reader.leaves().size(), qs.size(), ms(t100, 0.5), ms(t100, 0.99), ms(t100x2, 0.5),
					ms(t100x2, 0.99), ms(t10, 0.5), ms(tsum, 0.5), two.getSlices().length);
		} finally {
			pool.shutdown();
		}
	}

	static void top(IndexSearcher s, Query q, int k) throws Exception {
		s.search(q, TopScoreDocCollector.createSharedManager(k, null, k));
	}

	// ms is the p-quantile (nearest rank, as the Go benchmark's percentile) in milliseconds.
	static double ms(long[] ns, double p) {
		long[] s = ns.clone();
		Arrays.sort(s);
		return s[(int) (p * (s.length - 1))] / 1e6;
	}
}
