// Package engine is anna's public Go API: one directory on disk holding a
// document store (bbolt, the source of truth), a BM25 index (Bleve) and an
// HNSW graph of embeddings computed in-process, searched lexically, densely,
// or both fused with reciprocal rank fusion (k = 60; or by their scores,
// SearchOptions.Fusion, each list weighted by SearchOptions.Weights),
// optionally reranked by a cross-encoder — its order replacing the
// candidates', or its list fused with theirs (SearchOptions.RerankFusion,
// the ANNA pipeline).
//
//	eng, err := engine.Open(ctx, "my-index", engine.Options{})
//	if err != nil { ... }
//	defer eng.Close()
//	_, err = eng.Add(ctx, []engine.Document{{ID: "1", Title: "HNSW", Text: "layered proximity graphs"}})
//	res, err := eng.Search(ctx, "nearest neighbour graphs", engine.SearchOptions{K: 10})
//
// # Layout of an engine directory
//
//	anna.db      bbolt: documents, vectors per model fingerprint, change log,
//	             state (package storage); the only file that holds data
//	lexical/     Bleve index (derived: rebuilt from anna.db when lost)
//	dense.hnsw   HNSW graph (derived: rebuilt from anna.db when lost)
//
// # Invariants
//
//   - A batch is committed when its bbolt transaction commits. Documents and
//     their vectors commit together, so a committed document always has its
//     vector for the engine's model.
//   - The store has an identity (a random id written when anna.db is
//     created) and a change seq. Each derived index records the store id it
//     was built from and the last change it applied. An index in step with
//     the store has this store's id and exactly its seq; Open makes it so:
//     an index behind replays the changes it missed, one built from another
//     store or ahead of this one (the store lost changes: restored from an
//     older copy, or damaged) is rebuilt from the store, and Warnings says
//     why. The applied seq of the graph moves only once a batch is wholly in
//     it, so a graph saved after a failed update replays that batch.
//   - An engine directory belongs to one embedding model, recorded with its
//     first documents (a directory that holds none is bound to none).
//     Opening it with another model is refused (ModelMismatchError);
//     Reindex is the way to change models.
//   - A directory may record a fusion of its own (SetFusion; annactl eval
//     --choose-fusion measures and records one), kept in anna.db's state
//     with the model fingerprint it was chosen for: searches that name no
//     SearchOptions.Fusion use it while the directory embeds with that
//     model, and RRF otherwise (after Reindex to another model, or when
//     none is recorded).
//   - Any number of searches may run concurrently with one writer. Writers
//     (Add, Delete, Reindex) are serialised; across processes bbolt's file
//     lock admits one writer or any number of read-only opens.
//
// # Crash behaviour
//
// Killed at any point (SIGKILL, power loss), a directory loses no committed
// batch: the next Open replays what the indexes missed. Interrupted through
// its context, Add and Delete finish updating the indexes for a batch they
// have committed, and Reindex stops between batches and resumes when run
// again. anna.db is never re-created over what it held: a missing or empty
// anna.db beside derived indexes, or a damaged one, is refused with a
// DamageError. Check reports every problem of a directory without changing
// it; Repair salvages the store and rebuilds the rest.
//
// # Backends
//
// The BM25 and dense lists come from the directory's own indexes, or, with
// Options.Weaviate, from a collection of a Weaviate cluster (package
// index/weaviate) for corpora that outgrow one machine's memory. anna.db
// stays the source of truth either way; the collection is derived from it
// like the local indexes (it records the store's id and the last change
// applied; one behind replays what it missed on the next write or Open; one
// built from another directory is refused, one alias per directory), and
// anna still embeds, fuses, reranks, explains and makes snippets. Reindex
// fills a new collection and moves the alias. Check and Repair look at the
// local indexes only.
//
// # Read-only
//
// Options.ReadOnly writes nothing and binds nothing. The dense graph is
// brought up to date in memory; a BM25 index out of step with the store
// cannot be, so lexical and hybrid searches then fail with a RecoveryError
// until the directory is opened for writing once.
package engine
