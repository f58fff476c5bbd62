package main

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
	"github.com/anna-search/anna/mining"
)

// mine-negatives' indexes: the embedding model, the cached index of the
// corpus (built or completed from it), other models' indexes.

// teacherEngine is another model's index of the same corpus.
type teacherEngine struct {
	eng   *engine.Engine
	enc   encoder.Encoder
	close func()
}

// openTeacherEngine opens an index of the corpus for another model: an
// existing one (index), or, with dataset, the cache's index for that model,
// built or completed from the dataset's corpus.
func (a *app) openTeacherEngine(ctx context.Context, modelDir, index, dataset string) (teacherEngine, error) {
	enc, closeEnc, err := loadMiningEncoder(ctx, modelDir, index)
	if err != nil {
		return teacherEngine{}, err
	}
	if index == "" {
		index = defaultMiningIndex(dataset, enc.Fingerprint())
	}
	if dataset != "" {
		// The cached index of the corpus is brought up to date, then read
		// only (a shared lock), so that runs mining beside each other share
		// it. One that cannot take the writer's lock finds another run
		// reading it, which completed it first.
		eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: a.logf})
		if err == nil {
			err = a.indexDataset(ctx, eng, dataset)
			if cerr := eng.Close(); err == nil {
				err = cerr
			}
		} else if errors.Is(err, engine.ErrLocked) {
			a.logf("%s: read by another run; reading it as that run completed it", index)
			err = nil
		}
		if err != nil {
			closeEnc()
			return teacherEngine{}, err
		}
	}
	eng, err := engine.Open(ctx, index, engine.Options{Encoder: enc, Model: modelDir, Logf: a.logf, ReadOnly: true})
	if err != nil {
		closeEnc()
		return teacherEngine{}, err
	}
	return teacherEngine{eng: eng, enc: enc, close: func() { eng.Close(); closeEnc() }}, nil
}

// loadMiningEncoder loads the embedding model (flag, else the one the index
// records, else the default) wrapped in the shared embedding cache.
func loadMiningEncoder(ctx context.Context, modelDir, index string) (encoder.Encoder, func(), error) {
	if modelDir == "" && index != "" {
		m, err := engine.RecordedModel(index)
		if err != nil {
			return nil, nil, err
		}
		modelDir = m.Dir
		if m.Fingerprint != "" { // the index's model, wherever it is now
			if modelDir, err = engine.FindModel(m); err != nil {
				return nil, nil, err
			}
		}
	}
	var ort *encoder.ORTEncoder
	var err error
	if modelDir == "" {
		ort, err = encoder.Default(ctx)
	} else {
		ort, err = encoder.Load(ctx, modelDir, encoder.Options{})
	}
	if err != nil {
		return nil, nil, err
	}
	c, err := encoder.NewCache(ort, "")
	if err != nil {
		ort.Close()
		return nil, nil, err
	}
	// Documents and queries through the disk cache (a resumed or repeated
	// run embeds nothing twice); each query once for retrieval and teacher
	// together.
	memo, err := mining.NewQueryMemo(c, nil, 256)
	if err != nil {
		ort.Close()
		return nil, nil, err
	}
	return namedEncoder{memo, ort.Manifest().Name}, func() { ort.Close() }, nil
}

type namedEncoder struct {
	*mining.QueryMemo
	name string
}

func (n namedEncoder) ModelName() string { return n.name }

// defaultMiningIndex is where --dataset is indexed when no --index is given:
// one directory per dataset path and model.
func defaultMiningIndex(dataset, fp string) string {
	abs, err := filepath.Abs(dataset)
	if err != nil {
		abs = dataset
	}
	h := sha256.Sum256([]byte(abs + "\x00" + fp))
	return filepath.Join(home.CacheDir(), "mining", fmt.Sprintf("%s-%x", filepath.Base(abs), h[:6]))
}

// indexDataset adds the BEIR corpus to eng; unchanged documents are skipped,
// so this costs only a read when the index is already complete.
func (a *app) indexDataset(ctx context.Context, eng *engine.Engine, dir string) error {
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
	p := a.progress("indexing "+filepath.Base(dir), 0)
	is, err := ingest.Read(ctx, eng, f, path, ingest.Options{Batch: 512, Progress: func(pr ingest.Progress) {
		if pr.Read > 0 {
			p.update(pr.Read, "")
		}
	}})
	p.done()
	if err != nil {
		return fmt.Errorf("indexing %s: %w", path, err)
	}
	if is.Empty > 0 {
		fmt.Fprintf(a.stderr, "skipping %d documents with empty title and text\n", is.Empty)
	}
	n, added := is.Documents+is.Empty, is.Added+is.Updated
	if added > 0 || st.Documents == 0 {
		fmt.Fprintf(a.stderr, "indexed %s: %d documents (%d new or changed) in %s\n", path, n, added, eng.Dir())
	}
	return nil
}
