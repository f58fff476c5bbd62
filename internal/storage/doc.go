// Package storage keeps anna's documents, their vectors and the engine's
// state in one bbolt file. It is the source of truth: the lexical and dense
// indexes are derived from it and can be rebuilt from it at any time.
//
// # Layout
//
// bbolt buckets, all at the top level:
//
//	docs        doc ID -> doc record: version 2 | seq of the change that set
//	            the text | title | text | meta pairs; version 3, for a doc
//	            with MetaValues, adds them after the pairs (see encodeDoc)
//	vectors     one nested bucket per model fingerprint:
//	              fp -> { doc ID -> seq of the change that stored it | float32s }
//	vector_dims fp -> dimension (uint32 little-endian), fixed by the first
//	            vector stored for fp; later vectors of another length are refused
//	changes     seq (uint64 big-endian) -> op | text seq | doc ID
//	change_ids  doc ID -> seq of its entry in changes
//	state       engine key -> version | value (a tombstone when deleted)
//	meta        "format" -> "2", "store_id" -> 32 hex digits (random, written
//	            once at creation), "doc_count" -> number of docs (uint64
//	            big-endian), kept so Count need not walk the docs bucket
//
// Every record in docs, vectors, changes and state ends with a CRC-32C of a
// tag, its key (and, for vectors, the fingerprint) and its body. A damaged
// byte in a record is therefore reported when it is read (ErrCorrupt), never
// returned as data; bbolt itself checksums only its meta pages.
//
// # Seq and the change log
//
// Every change to a document (Put, PutVectors, Delete of an existing ID)
// takes the next number from the changes bucket's sequence, so seq is a
// monotonically increasing version of the store; Seq returns the last one and
// an empty store is at 0. The change log keeps only the latest entry per doc
// ID: writing an ID removes its previous entry (found through change_ids).
// The log therefore holds exactly one entry per ID ever written (deletions
// stay as tombstones), and ChangesSince(s) visits exactly the IDs whose last
// change is after s. A derived index that records the seq it has applied can
// catch up by replaying ChangesSince(applied) and is then exactly in sync.
// OpVectors entries carry the seq of the doc's last text change, so an index
// of text replaying them can skip those whose text it already has.
//
// # Invariants (verified by Check)
//
//   - Every document has exactly one change-log entry, a put or vectors entry
//     whose text seq equals the document's; every other ID's entry is a
//     delete; change_ids and the log point at each other.
//   - Every vector belongs to an existing document and has its model's
//     recorded dimension.
//   - The document counter equals the number of documents.
//   - Every record's checksum holds.
//
// # Crash behaviour
//
// Every write method is one bbolt transaction: documents, vectors, change
// entries, counters and state written with them commit together or not at
// all, and bbolt's commit is durable (fsync) when the method returns. A new
// store is created whole under a temporary name and renamed into place, so
// anna.db either does not exist or is a complete store: Open refuses a
// zero-length file (ErrEmptyFile), a truncated one and one that is not a
// store (ErrCorrupt), and never re-creates an existing path. A panic inside
// bbolt caused by a damaged page becomes an error wrapping ErrCorrupt.
//
// bbolt falls back to its older meta page when the newer one is damaged,
// silently dropping the last transaction; Open detects a damaged meta page
// (Warning) and Check reports it. What the store lost can only be told
// against what the derived indexes applied: the engine compares their
// applied seqs with Seq.
//
// Salvage recovers the whole records of a damaged file into a new store by
// reading its pages directly, keeping the newest copy of each record.
//
// A nil context.Context given to a function of this package is
// context.Background().
package storage
