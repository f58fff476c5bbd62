// Package weaviate is anna's retrieval backend over a Weaviate cluster: the
// BM25 list and the dense (near-vector) list of a search come from a
// Weaviate collection instead of the local Bleve index and HNSW graph. anna
// still embeds every document and query itself (the collection has no
// vectorizer), and still fuses, reranks and explains; the engine keeps its
// bbolt store as the source of truth and this package's collection is
// derived from it, like the local indexes.
//
// It speaks Weaviate's REST and GraphQL API with net/http. The official Go
// client (github.com/weaviate/weaviate-go-client/v5) is not served by the
// module proxy this project builds from, and it would bring gRPC, protobuf
// and go-openapi for the eight endpoints used here: /v1/schema,
// /v1/aliases, /v1/batch/objects (upsert and delete), /v1/objects (the
// state object), /v1/graphql (bm25, nearVector, Aggregate) and the
// readiness probe.
//
// # Layout in Weaviate
//
// A collection is named Alias_gN (N counts up); the alias Alias (Config.Alias)
// points at the one in use, and Reindex fills a new generation and moves the
// alias in one call, so readers that address the alias switch at once. A
// collection holds one object per passage of a document (a document that
// fits the model is one passage): properties docId, passage and meta on
// every object, title and text on passage 0 only (so BM25 sees each
// document once), and the passage's vector. Object ids are UUIDs derived
// from (document id, passage), so an upsert sent twice writes the same
// objects: replaying a batch is harmless. One more object, with a fixed id
// and no vector, holds the collection's state: the anna store it was built
// from, the last store change applied and the vector key (model and
// chunking) of its vectors.
//
// Metadata is the text[] property meta, one "key\x1fvalue" entry per pair
// with field tokenization (exact, untouched bytes apart from surrounding
// whitespace, which field tokenization trims); anna's filters translate to
// Equal / ContainsAny / Like / And / Or / Not on it. A Prefix whose value
// holds * or ? (Like's wildcards) and a key holding \x1f are refused, and so
// are ranges (Gt, Gte, Lt, Lte, Range: ErrUnsupportedFilter). Only string
// metadata (engine.Document.Meta) is indexed: typed values (MetaValues:
// numbers, lists) are not, so a filter on them matches nothing here.
//
// # Scores
//
// Dense: the collection's distance is cosine; the score reported is
// 1 - distance, the cosine similarity, as the local graph reports. A
// document is ranked by its best passage. BM25: Weaviate's BM25F over title
// and text with k1 1.2 and b 0.75, word tokenization (lower case, split on
// anything not a letter or digit) and Weaviate's "en" stop words, without
// stemming; anna's own BM25 scores title and text separately (the best
// field plus half the other) after Bleve's English analysis with Porter
// stemming. On SciFact that costs BM25 0.097 nDCG@10 (0.5930 against
// 0.6897). Weaviate computes BM25 statistics per shard. ScoreIDs gives the
// BM25 score of named documents (Weaviate cannot score a text it does not
// hold).
//
// # Invariants and failures
//
//   - Writes use consistency level QUORUM (Config.WriteConsistency): with a
//     replication factor of 2 an acknowledged batch is on both replicas.
//     Searches use ONE, so they keep answering with one node down.
//   - The state object is written after a batch's objects, with the same
//     consistency: a collection whose state says change N has every change
//     up to N. A batch that fails part way (a node down) leaves the state
//     where it was; the engine replays from there on the next write or open.
//   - Every request carries the API key (Authorization: Bearer) when one is
//     set; a 401 or 403 is ErrUnauthorized. Requests go to the first of
//     Config.URLs that answers, and move to the next on a connection error.
//   - Errors name the URL, the collection and the operation, and wrap the
//     cause (*Error).
//   - Weaviate resolves a consistency level over the replicas it sees up:
//     right after a node dies, writes to its shards fail ("cannot reach
//     enough replicas") until the cluster notices; after, QUORUM of one
//     live replica is one. Collections created with a replication factor
//     above 1 have asynchronous replication on, which brings a replica
//     that was down up to date. A batch delete across shards is refused
//     while a replica is down (1.35 wants one resolved level for all
//     shards), so Upsert deletes only the passages a document lost.
//
// A nil context.Context given to a function of this package is
// context.Background().
package weaviate
