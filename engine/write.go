package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/anna-search/anna/lang"

	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// Document is one document. ID is required and unique within a directory;
// Title and Text are searched (one of them must not be blank); Meta and
// MetaValues are its metadata: kept, returned with results, and what
// filters match (SearchOptions.Filter).
//
// Meta holds the keys with one string value. MetaValues holds the others:
// a number (NumberValue(1960)), which filters compare as a number, or a
// list (StringsValue("a", "b"), ListValue(...)), a multi-valued key that a
// filter matches when any element does. A key is in one of the two only;
// Add stores a MetaValues string in Meta, so stored documents and results
// keep every single string in Meta. Keys must not be empty, numbers must
// be finite, keys and strings at most 1 MiB.
type Document struct {
	ID         string
	Title      string
	Text       string
	Meta       map[string]string
	MetaValues map[string]Value
	// Language is the language the document is written in, an ISO 639-1
	// code ("de", "zh"; lang.Parse's forms are accepted and stored as the
	// code); "" leaves it to Options.Language (by default detected). BM25
	// and the snippets analyse the document for it (package lang).
	Language string
}

// AddResult tells what an Add did.
type AddResult struct {
	Added     int  // new documents
	Updated   int  // existing documents whose content changed
	Unchanged int  // already stored with the same title, text and metadata: not re-embedded
	Reused    int  // added or updated with the vectors of a replaced document of the same title and text (Apply)
	Deleted   int  // documents removed (Apply)
	Committed bool // the batch is in the store (false when nothing changed or Add failed before)
}

// EmbedText is the text the dense side embeds for a document: title and text
// joined by a space, as BEIR's sentence-transformers evaluation does. The
// encoder truncates it to the model's max length (256 tokens for MiniLM);
// BM25 indexes the full text.
func EmbedText(d Document) string {
	switch {
	case d.Title == "":
		return d.Text
	case d.Text == "":
		return d.Title
	}
	return d.Title + " " + d.Text
}

// Add upserts a batch of documents: it embeds those that are new or changed,
// commits them with their vectors in one transaction, then updates both
// indexes. When Add returns nil the batch is durable and searchable.
// Documents identical to the stored ones are skipped, so re-running an
// interrupted ingest costs only the reading. Within a batch the last
// occurrence of an ID wins.
//
// Once the batch is committed, the indexes are updated even if ctx is
// cancelled meanwhile (a fraction of a second), so an interrupted ingest
// leaves nothing to replay; an error after the commit (or a crash) is
// repaired from the store by the next write or Open. res.Committed tells
// whether the batch is stored, also when err is not nil.
func (e *Engine) Add(ctx context.Context, docs []Document) (res AddResult, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	return e.apply(ctx, docs, nil)
}

// Apply adds docs (as Add does) and removes the documents deletes names,
// in one commit: a reader, or the next Open after a crash, sees both or
// neither. An ID in both is added, not removed; unknown IDs in deletes are
// ignored.
//
// A new or changed document whose title and text are those of a document
// it replaces — the one stored under its own ID, or one that deletes
// removes — keeps that document's vectors instead of being embedded
// again: a document whose metadata alone changed, or one moved to another
// ID (a file renamed), costs no model time. AddResult.Reused counts them,
// AddResult.Deleted the documents removed.
func (e *Engine) Apply(ctx context.Context, docs []Document, deletes []string) (res AddResult, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	return e.apply(ctx, docs, deletes)
}

// apply is Add and Apply: a closed engine is refused first, then the
// arguments.
func (e *Engine) apply(ctx context.Context, docs []Document, deletes []string) (res AddResult, err error) {
	if err := e.enter(); err != nil {
		return res, err
	}
	defer e.leave()
	if err := checkIDs("apply", deletes); err != nil {
		return res, err
	}
	if err := validate(docs); err != nil {
		return res, err
	}
	if e.opts.ReadOnly {
		return res, ErrReadOnly
	}
	if e.via != nil {
		return e.via.apply(ctx, docs, deletes)
	}
	docs = lastWins(docs)
	for i := range docs {
		docs[i] = canonicalMeta(docs[i])
		if docs[i].Language, _ = lang.Parse(docs[i].Language); docs[i].Language == lang.Auto {
			docs[i].Language = "" // detected, as when none is given
		}
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	ids := make([]string, len(docs), len(docs)+len(deletes))
	putting := make(map[string]bool, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
		putting[d.ID] = true
	}
	for _, id := range deletes {
		if !putting[id] {
			ids = append(ids, id)
		}
	}
	existing, err := e.store.GetMany(ids)
	if err != nil {
		return res, fmt.Errorf("engine: reading stored documents: %w", err)
	}
	have := make(map[string]storage.Doc, len(existing))
	var gone []string
	for _, d := range existing {
		have[d.ID] = d
		if !putting[d.ID] {
			gone = append(gone, d.ID)
		}
	}
	var changed []storage.Doc
	for _, d := range docs {
		old, ok := have[d.ID]
		switch {
		case !ok:
			res.Added++
		case sameDoc(old, d):
			res.Unchanged++
			continue
		default:
			res.Updated++
		}
		changed = append(changed, storage.Doc(d))
	}
	res.Deleted = len(gone)
	if len(changed) == 0 && len(gone) == 0 {
		return res, nil
	}
	var embs []storage.Embedding
	e.mu.RLock()
	m, bound, ch := e.cur.model, e.cur.bound, e.cur.chunking
	e.mu.RUnlock()
	if len(changed) > 0 {
		reused, err := e.reusable(changed, have)
		if err != nil {
			return AddResult{}, err
		}
		var fresh []storage.Doc
		var at []int
		for i, d := range changed {
			if reused[i].Vectors == nil {
				fresh = append(fresh, d)
				at = append(at, i)
			} else {
				res.Reused++
			}
		}
		embs = reused
		if len(fresh) > 0 {
			if err := e.ensureEncoder(ctx); err != nil { // the model, loaded on first use
				return AddResult{}, err
			}
			e.mu.RLock()
			enc := e.cur.enc
			m, bound, ch = e.cur.model, e.cur.bound, e.cur.chunking
			e.mu.RUnlock()
			got, err := e.embedDocs(ctx, enc, ch, fresh)
			if err != nil {
				return AddResult{}, fmt.Errorf("engine: %w", err)
			}
			for j, i := range at {
				embs[i] = got[j]
			}
		}
	}
	var state map[string][]byte
	if !bound {
		state = e.modelState(m, ch) // the first documents bind the directory to the model
	}
	prev, err := e.store.Seq()
	if err != nil {
		return AddResult{}, fmt.Errorf("engine: %w", err)
	}
	fp := vectorKey(m.Fingerprint, ch)
	if len(changed) == 0 {
		fp, state = "", nil
	}
	seq, err := e.store.Replace(changed, fp, embs, state, gone)
	if err != nil {
		return AddResult{}, fmt.Errorf("engine: storing documents: %w", err)
	}
	res.Committed = true
	if len(changed) > 0 {
		e.mu.Lock()
		e.cur.bound = true
		e.mu.Unlock()
	}
	// From here the batch is committed: finish the indexes whatever ctx
	// says, so an interrupt leaves them in step.
	if err := e.be.apply(context.WithoutCancel(ctx), prev, seq, changed, embs, gone); err != nil {
		return res, fmt.Errorf("engine: documents stored; %w", err)
	}
	return res, nil
}

// reusable finds, for each changed document, the stored vectors of a
// document among olds (those it replaces or that are removed with it)
// with the same title and text, under the engine's current vector key;
// an Embedding without vectors where there is none.
func (e *Engine) reusable(changed []storage.Doc, olds map[string]storage.Doc) ([]storage.Embedding, error) {
	out := make([]storage.Embedding, len(changed))
	if len(olds) == 0 {
		return out, nil
	}
	byText := make(map[[2]string]string, len(olds))
	for id, d := range olds {
		byText[[2]string{d.Title, d.Text}] = id
	}
	var src []string
	var at []int
	for i, d := range changed {
		if id, ok := byText[[2]string{d.Title, d.Text}]; ok {
			src = append(src, id)
			at = append(at, i)
		}
	}
	if len(src) == 0 {
		return out, nil
	}
	e.mu.RLock()
	key, bound := e.vecKey(), e.cur.bound
	e.mu.RUnlock()
	if !bound {
		return out, nil
	}
	embs, err := e.store.Vectors(key, src)
	if err != nil {
		return nil, fmt.Errorf("engine: reading stored vectors: %w", err)
	}
	for j, i := range at {
		if len(embs[j].Vectors) > 0 {
			out[i] = embs[j]
		}
	}
	return out, nil
}

// Delete removes documents by ID. Unknown IDs are ignored. It returns the
// number of documents that existed. Like Add, it finishes the indexes once
// the deletion is committed. An empty ID is refused with ErrEmptyID.
func (e *Engine) Delete(ctx context.Context, ids []string) (n int, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.leave()
	if err := checkIDs("delete", ids); err != nil {
		return 0, err
	}
	if e.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if e.via != nil {
		return e.via.delete(ctx, ids)
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	existing, err := e.store.GetMany(ids)
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	if len(existing) == 0 {
		return 0, nil
	}
	gone := make([]string, len(existing))
	for i, d := range existing {
		gone[i] = d.ID
	}
	prev, err := e.store.Seq()
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	seq, err := e.store.Delete(gone)
	if err != nil {
		return 0, fmt.Errorf("engine: deleting: %w", err)
	}
	if err := e.be.apply(context.WithoutCancel(ctx), prev, seq, nil, nil, gone); err != nil {
		return len(gone), fmt.Errorf("engine: deleted from the store; %w", err)
	}
	return len(gone), nil
}

// Get returns the stored documents with the given IDs, in the order given;
// unknown IDs are skipped. An empty ID is refused with ErrEmptyID. ctx is
// checked before the store is read.
func (e *Engine) Get(ctx context.Context, ids ...string) (_ []Document, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := checkIDs("get", ids); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.via != nil {
		return e.via.get(ctx, ids)
	}
	docs, err := e.store.GetMany(ids)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = Document(d)
	}
	return out, nil
}

// Vectors returns the stored vectors of document id for the engine's model:
// one per passage (one for a document that fits the model).
func (t Teacher) Vectors(id string) ([][]float32, bool, error) {
	e := t.e
	if err := e.enter(); err != nil {
		return nil, false, err
	}
	defer e.leave()
	if e.via != nil {
		return e.via.vectors(id)
	}
	emb, ok, err := e.store.Vector(e.vecKey(), id)
	if err != nil {
		return nil, false, fmt.Errorf("engine: %w", err)
	}
	return emb.Vectors, ok, nil
}

// IsEmpty reports whether d has no title and no text (whitespace only):
// nothing could find it, and its embedding would be the model's response to
// no text at all, close to many queries. Add refuses such documents with
// ErrEmptyDocument; tools skip and count them.
func IsEmpty(d Document) bool {
	return strings.TrimSpace(d.Title) == "" && strings.TrimSpace(d.Text) == ""
}

// validate rejects documents that cannot be stored, naming the offender.
// MaxIDBytes is the longest document ID Add takes. IDs are keys of the
// store (bbolt refuses keys over 32 KiB) and of both indexes; the longest
// path a file system names is 4,096 bytes.
const MaxIDBytes = 4096

func validate(docs []Document) error {
	for i, d := range docs {
		switch {
		case strings.TrimSpace(d.ID) == "":
			return fmt.Errorf("engine: document %d in batch: %w", i, ErrEmptyID)
		case len(d.ID) > MaxIDBytes:
			return fmt.Errorf("engine: document %d in batch: %w", i, invalidDoc{fmt.Errorf("ID %s is longer than %d bytes", clip.Quote(d.ID), MaxIDBytes)})
		case !utf8.ValidString(d.ID):
			return fmt.Errorf("engine: document %d in batch: %w", i, invalidDoc{errors.New("ID is not valid UTF-8")})
		case IsEmpty(d):
			return fmt.Errorf("engine: document %s: %w", clip.Quote(d.ID), ErrEmptyDocument)
		}
		if err := checkMeta(d); err != nil {
			return fmt.Errorf("engine: document %s: %w", clip.Quote(d.ID), invalidDoc{err})
		}
		if _, err := lang.Parse(d.Language); err != nil {
			return fmt.Errorf("engine: document %q: %w", d.ID, err)
		}
	}
	return nil
}

// checkIDs refuses an empty ID among ids, naming its position.
func checkIDs(op string, ids []string) error {
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("engine: %s: ID %d: %w", op, i, ErrEmptyID)
		}
	}
	return nil
}

// lastWins keeps the last occurrence of each id, in first-seen order.
func lastWins(docs []Document) []Document {
	pos := make(map[string]int, len(docs))
	out := make([]Document, 0, len(docs))
	for _, d := range docs {
		if i, ok := pos[d.ID]; ok {
			out[i] = d
			continue
		}
		pos[d.ID] = len(out)
		out = append(out, d)
	}
	return out
}

func sameDoc(a storage.Doc, b Document) bool {
	if a.Title != b.Title || a.Text != b.Text || a.Language != b.Language || len(a.Meta) != len(b.Meta) ||
		!maps.EqualFunc(a.MetaValues, b.MetaValues, Value.Equal) {
		return false
	}
	for k, v := range a.Meta {
		if w, ok := b.Meta[k]; !ok || w != v {
			return false
		}
	}
	return true
}
