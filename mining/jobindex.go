package mining

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
)

// Mine's indexes: the embedding model, the cached index of the corpus
// (built or completed from it), other models' indexes.

// teacherEngine is another model's index of the same corpus.
type teacherEngine struct {
	eng *engine.Engine
	enc *namedEncoder
}

func (t teacherEngine) close() { t.eng.Close(); t.enc.close() }

// openTeacherEngine opens an index of the corpus for another model: an
// existing one (index), or, with dataset, the cache's index for that model,
// built or completed from the dataset's corpus.
func (j *job) openTeacherEngine(ctx context.Context, modelDir, index, dataset string) (teacherEngine, error) {
	enc, err := loadEncoder(ctx, modelDir, index)
	if err != nil {
		return teacherEngine{}, err
	}
	if index == "" {
		index = defaultIndex(dataset, enc.Fingerprint())
	}
	if dataset != "" {
		// The cached index of the corpus is brought up to date, then read
		// only (a shared lock), so that runs mining beside each other share
		// it. One that cannot take the writer's lock finds another run
		// reading it, which completed it first.
		eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: j.logf})
		if err == nil {
			err = j.indexDataset(ctx, eng, dataset)
			if cerr := eng.Close(); err == nil {
				err = cerr
			}
		} else if errors.Is(err, engine.ErrLocked) {
			j.logf("%s: read by another run; reading it as that run completed it", index)
			err = nil
		}
		if err != nil {
			enc.close()
			return teacherEngine{}, err
		}
	}
	eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: j.logf, ReadOnly: true})
	if err != nil {
		enc.close()
		return teacherEngine{}, err
	}
	return teacherEngine{eng: eng, enc: enc}, nil
}

// namedEncoder is a model behind the shared embedding cache and a query
// memo, with its name for the teachers' labels.
type namedEncoder struct {
	*QueryMemo
	name  string
	close func()
}

// ModelName is the model's manifest name.
func (n *namedEncoder) ModelName() string { return n.name }

// label names the model in a teacher's label: its name, else its
// fingerprint's start.
func (n *namedEncoder) label() string {
	if n.name != "" {
		return n.name
	}
	fp := n.Fingerprint()
	return fp[:min(12, len(fp))]
}

// loadEncoder loads the embedding model (modelDir, else the one the index
// records, else the default) wrapped in the shared embedding cache.
func loadEncoder(ctx context.Context, modelDir, index string) (*namedEncoder, error) {
	if modelDir == "" && index != "" {
		m, err := engine.RecordedModel(index)
		if err != nil {
			return nil, err
		}
		modelDir = m.Dir
		if m.Fingerprint != "" { // the index's model, wherever it is now
			if modelDir, err = engine.FindModel(m); err != nil {
				return nil, err
			}
		}
	}
	var ort *encoder.Model
	var err error
	if modelDir == "" {
		ort, err = encoder.Default(ctx)
	} else {
		ort, err = encoder.Load(ctx, modelDir, encoder.Options{})
	}
	if err != nil {
		return nil, err
	}
	c, err := encoder.NewCache(ort, "")
	if err != nil {
		ort.Close()
		return nil, err
	}
	// Documents and queries through the disk cache (a resumed or repeated
	// run embeds nothing twice); each query once for retrieval and teacher
	// together.
	memo, err := NewQueryMemo(c, nil, 256)
	if err != nil {
		ort.Close()
		return nil, err
	}
	return &namedEncoder{QueryMemo: memo, name: ort.Manifest().Name, close: func() { ort.Close() }}, nil
}

// defaultIndex is where a dataset is indexed when no index is given: one
// directory per dataset path and model.
func defaultIndex(dataset, fp string) string {
	abs, err := filepath.Abs(dataset)
	if err != nil {
		abs = dataset
	}
	h := sha256.Sum256([]byte(abs + "\x00" + fp))
	return filepath.Join(home.CacheDir(), "mining", fmt.Sprintf("%s-%x", filepath.Base(abs), h[:6]))
}

// indexDataset adds the BEIR corpus to eng; unchanged documents are skipped,
// so this costs only a read when the index is already complete.
func (j *job) indexDataset(ctx context.Context, eng *engine.Engine, dir string) error {
	st, err := eng.Stats()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open corpus: %w", err)
	}
	defer f.Close()
	name := filepath.Base(dir)
	j.progress(Progress{Stage: StageIndexing, Name: name, Start: true})
	is, err := ingest.Read(ctx, eng, f, path, ingest.Options{Batch: 512, Progress: func(pr ingest.Progress) {
		if pr.Read > 0 {
			j.progress(Progress{Stage: StageIndexing, Name: name, Done: pr.Read})
		}
	}})
	j.progress(Progress{Stage: StageIndexing, Name: name, End: true})
	if err != nil {
		return fmt.Errorf("indexing %s: %w", path, err)
	}
	if is.Empty > 0 {
		j.logf("skipping %d documents with empty title and text", is.Empty)
	}
	n, added := is.Documents+is.Empty, is.Added+is.Updated
	if added > 0 || st.Documents == 0 {
		j.logf("indexed %s: %d documents (%d new or changed) in %s", path, n, added, eng.Dir())
	}
	return nil
}
