package engine

import (
	"context"
	"fmt"
)

// Stats describe an open engine directory.
type Stats struct {
	Dir           string
	ReadOnly      bool
	Documents     int    // in the store
	Seq           uint64 // the store's last change
	Model         Model
	LexicalDocs   uint64 // documents in the BM25 index (0 when it cannot be read)
	LexicalSeq    uint64 // the store change the BM25 index has applied
	LexicalStale  string // why the BM25 index cannot answer (read-only), "" when it can
	DenseDocs     int    // documents in the dense index
	DensePassages int    // their passages: the HNSW graph's nodes (see Chunking)
	Chunking      Chunking
	DenseSeq      uint64 // the store change the graph reflects
	Reranker      bool
	// Fusion is what a search with SearchOptions.Fusion "" fuses with;
	// FusionChoice is the choice recorded by SetFusion (zero when none),
	// which applies only while FusionChoice.Active(Model.Fingerprint).
	Fusion       Fusion
	FusionChoice FusionChoice
	Backend      string   // "local", or "weaviate ALIAS (COLLECTION)": where the lists come from
	Warnings     []string // see Engine.Warnings
	// WriterPID is, for a read-only engine that reads through the process
	// that has its directory open for writing (see Options.ReadOnly), that
	// process's id; 0 when the engine reads the directory itself.
	WriterPID int
}

// Stats reports counts from the store and both indexes.
func (e *Engine) Stats() (Stats, error) {
	if err := e.enter(); err != nil {
		return Stats{}, err
	}
	defer e.leave()
	if e.via != nil {
		return e.via.stats(e)
	}
	n, err := e.store.Count()
	if err != nil {
		return Stats{}, fmt.Errorf("engine: %w", err)
	}
	seq, err := e.store.Seq()
	if err != nil {
		return Stats{}, fmt.Errorf("engine: %w", err)
	}
	st := Stats{Dir: e.dir, ReadOnly: e.opts.ReadOnly, Documents: n, Seq: seq, Reranker: e.opts.Reranker != nil, Warnings: e.Warnings(), Backend: "local"}
	if err := e.be.stats(context.Background(), &st); err != nil {
		return Stats{}, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	st.Model, st.Chunking = e.cur.model, e.cur.chunking
	st.FusionChoice, st.Fusion = e.cur.fusion, e.cur.fusion.inEffect(e.cur.model.Fingerprint)
	return st, nil
}
