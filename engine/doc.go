// Package engine is anna's public Go API: one directory on disk holding a
// document store (bbolt, the source of truth), a BM25 index (Bleve) and an
// HNSW graph of embeddings computed in-process, searched lexically, densely,
// or both fused — by their scores (DBSF, DefaultFusion), by reciprocal rank
// (k = 60) or min-max, SearchOptions.Fusion, each list weighted by
// SearchOptions.Weights —
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
//	anna.sock    Unix socket (0600) on which the process that has the
//	             directory open for writing answers other processes'
//	             read-only opens (see Read-only and sharing); removed on
//	             Close, replaced by the next writer when one was killed
//	anna.lock    the writers' turnstile (empty; flocked by a writer while
//	             it waits for anna.db's lock, so that readers let it in)
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
//   - An engine directory belongs to one embedding model, recorded by
//     fingerprint (with its dimension, directory and manifest name) with
//     its first documents (a directory that holds none is bound to none).
//     Opening it with another model is refused (ModelMismatchError, naming
//     both models); Reindex is the way to change models. Options.Model may
//     name a model another server runs, "URL#NAME" (encoder.OpenRemote):
//     recorded by its name and dimension, with the URL where it was, which
//     a later Open without Options.Model calls again.
//   - Opened with neither Options.Model nor Options.Encoder, a bound
//     directory loads its model only when something first embeds (a
//     dense, hybrid or rerank search, Add of new text, Repair): lexical
//     searches and Stats never need it. It is looked for where it was
//     recorded, then among the models installed under $ANNA_HOME/models by
//     fingerprint (FindModel); one found nowhere is a ModelNotFoundError
//     naming it. With Options.KeepModel (annactl index and reindex) the
//     model a directory binds to is copied under $ANNA_HOME/models first
//     (unless one of its fingerprint is there), so moving or deleting the
//     model directory given breaks nothing.
//   - A directory may record a fusion of its own (SetFusion; annactl eval
//     --choose-fusion measures and records one), kept in anna.db's state
//     with the model fingerprint it was chosen for: searches that name no
//     SearchOptions.Fusion use it while the directory embeds with that
//     model, and DefaultFusion (DBSF) otherwise (after Reindex to another
//     model, or when none is recorded).
//   - A caller may keep small records of its own in anna.db's state
//     (SetState, State: package ingest's files that failed to read), apart
//     from the engine's keys and never read by it; each SetState is its
//     own transaction, not part of an Add.
//   - Any number of searches may run concurrently with one writer. Writers
//     (Add, Delete, Reindex) are serialised. Across processes bbolt's file
//     lock admits one writer or any number of read-only opens, and the
//     writer answers the read-only opens of other processes, so readers
//     work beside it (Read-only and sharing). A writable Open fails at
//     once with ErrLocked when another process has the directory open for
//     writing, unless Options.WriteThrough: then it writes through that
//     process (Add, Delete, Teacher().DeleteExcept; annactl index and delete beside
//     annactl serve), with that process's model; it waits up to 10 s for read-only opens that hold the lock
//     (reading the directory themselves) to close before failing with
//     ErrLocked. While it waits it holds the turnstile (anna.lock), and
//     read-only opens that come meanwhile wait for it and then read
//     through it, so it waits only for the readers already in, however
//     many come and go. A directory already open in this process is not opened
//     again for writing (ErrLocked, "already open ... in this process");
//     a read-only Open beside this process's own writer reads through it
//     like another process's. The package keeps one piece of global
//     state for this: the set of directories the process has open.
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
// it; Repair salvages the store and rebuilds the rest. A writer killed
// leaves anna.sock behind; it keeps nobody waiting: a read-only open tries
// it only while the lock is held, a reader that read through the writer
// opens the directory itself on its next call, and the next writer
// replaces it.
//
// # Contexts and panics
//
// A nil context.Context given to a function of this package is
// context.Background(). A nil *Engine is a closed one: its methods
// return ErrClosed (Close returns nil, as a second Close does), and a
// closed engine answers ErrClosed before it looks at the arguments. Open, Check, Repair and the methods that take a
// context never panic: a panic in a plug-in (Options.Encoder,
// Options.Reranker) or in the engine's own code, on the caller's goroutine
// or on one the engine started, is returned as an error naming the panic
// value and the function that panicked, and the engine stays usable (a
// write that panicked after its commit is finished by the next write or
// Open, like any failed index update).
//
// # Backends
//
// The BM25 and dense lists come from the directory's own indexes, or, with
// Options.Weaviate, from a collection of a Weaviate cluster (package
// internal/index/weaviate) for corpora that outgrow one machine's memory. anna.db
// stays the source of truth either way; the collection is derived from it
// like the local indexes (it records the store's id and the last change
// applied; one behind replays what it missed on the next write or Open; one
// built from another directory is refused, one alias per directory), and
// anna still embeds, fuses, reranks, explains and makes snippets. Reindex
// fills a new collection and moves the alias. Check and Repair look at the
// local indexes only.
//
// # Read-only and sharing
//
// Options.ReadOnly writes nothing and binds nothing. The dense graph is
// brought up to date in memory; a BM25 index out of step with the store
// cannot be, so lexical and hybrid searches then fail with a RecoveryError
// until the directory is opened for writing once.
//
// A read-only Open of a directory that another process has open for
// writing reads through that process: the writer answers on anna.sock
// (HTTP with JSON, internal to this package, owner-only) and Search, Get,
// Stats and the Teacher's Vectors and LexicalScores are its answers, from its last
// committed state, the same as its own calls give (Stats.WriterPID names
// it). Such an engine holds no lock and loads no model unless asked
// (Teacher().LoadEncoder): the writer embeds the queries; a reranking search
// retrieves through the writer and reranks with this engine's
// Options.Reranker; Options.Encoder, or Options.Model (by its manifest),
// is checked against the writer's model. A writer still opening the
// directory is waited for (Logf says so). When the writer closes or dies,
// the next call opens the directory itself (or reads through the next
// writer) and goes on. UnknownKeys and MetadataKeys are the writer's too.
//
// A writable Open with Options.WriteThrough of a directory another process
// has open for writing (and shares) writes through it the same way: Add,
// Delete and Teacher().DeleteExcept (IDs listed there) are its calls, each committed
// there before it returns, and the writer embeds with its own model (an
// Options.Model or Encoder of another fingerprint is refused, even before
// the directory is bound). Reindex and SetFusion are refused (ErrLocked).
// When the writer goes away the call is made again on the next target (a
// batch added twice is stored once).
//
// Options.NoShare turns all this off for an engine: then a reader beside
// a writer fails with ErrLocked. Check beside a writer runs in the
// writer, on its open store and indexes (in this process on its engine, in
// another through anna.sock); Repair of a directory that needs it refuses
// beside a writer (ErrLocked).
//
// Read-only opens that read the directory themselves (including one that
// read through a writer which has closed since) hold bbolt's shared lock
// until they Close, so a writer waits for them (up to 10 s, above): close
// read-only engines between uses where another process may want to write.
package engine
