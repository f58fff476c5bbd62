package beir

import (
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/shareddata"
)

// TestSharedDatasets loads every BEIR collection in ../shared/datasets and
// checks (and logs) its counts: documents, queries in queries.jsonl, judged
// queries and judgments of the split. They are the counts the datasets'
// README states and the readers before this package produced.
func TestSharedDatasets(t *testing.T) {
	root := shareddata.Path(t, "datasets")
	for _, tc := range []struct {
		set, split                    string
		docs, queries, judged, judgms int
	}{
		{"scifact", "test", 5183, 1109, 300, 339},
		{"scifact", "train", 5183, 1109, 809, 919},
		{"cranfield", "test", 1400, 225, 225, 1837},
		{"cisi", "test", 1460, 76, 76, 3114},
		{"cacm", "test", 3204, 52, 52, 796},
		{"squad2-dev-half", "dev", 646, 2910, 2910, 2910},
	} {
		dir := filepath.Join(root, tc.set)
		ds, err := Load(dir, tc.split)
		if err != nil {
			t.Errorf("%s: %v", tc.set, err)
			continue
		}
		all, err := ReadQueriesFile(QueriesPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, rels := range ds.Qrels {
			n += len(rels)
		}
		t.Logf("%s/%s: %d documents, %d queries, %d judged, %d judgments", tc.set, tc.split, len(ds.Corpus), len(all), len(ds.Queries), n)
		if len(ds.Corpus) != tc.docs || len(all) != tc.queries || len(ds.Queries) != tc.judged || len(ds.Qrels) != tc.judged || n != tc.judgms {
			t.Errorf("%s/%s: want %d documents, %d queries, %d judged, %d judgments", tc.set, tc.split, tc.docs, tc.queries, tc.judged, tc.judgms)
		}
	}
}
