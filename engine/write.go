package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/anna-search/anna/storage"
)

// Document is what callers add. ID must be non-empty; Title may be empty.
type Document = storage.Doc

// AddResult tells what an Add did.
type AddResult struct {
	Added     int    // new documents
	Updated   int    // existing documents whose content changed
	Unchanged int    // already stored with the same title, text and metadata: not re-embedded
	Seq       uint64 // storage sequence after the batch (0 when nothing changed)
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
// occurrence of an id wins.
func (e *Engine) Add(ctx context.Context, docs []Document) (AddResult, error) {
	var res AddResult
	if err := validate(docs); err != nil {
		return res, err
	}
	docs = lastWins(docs)
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.store == nil {
		return res, errClosed
	}
	changed := docs[:0:0]
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	existing, err := e.store.GetMany(ids)
	if err != nil {
		return res, fmt.Errorf("engine: reading stored documents: %w", err)
	}
	have := make(map[string]storage.Doc, len(existing))
	for _, d := range existing {
		have[d.ID] = d
	}
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
		changed = append(changed, d)
	}
	if len(changed) == 0 {
		return res, nil
	}
	e.mu.RLock()
	enc, fp, ix := e.enc, e.fp, e.dense
	e.mu.RUnlock()
	texts := make([]string, len(changed))
	for i, d := range changed {
		texts[i] = EmbedText(d)
	}
	vecs, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		return AddResult{}, fmt.Errorf("engine: embedding %d documents: %w", len(texts), err)
	}
	seq, err := e.store.Put(changed, fp, vecs)
	if err != nil {
		return AddResult{}, fmt.Errorf("engine: storing documents: %w", err)
	}
	res.Seq = seq
	// From here the batch is committed. If an index update fails (or the
	// process dies) the next Open replays it from the change log.
	if err := e.lex.Index(ctx, changed, seq); err != nil {
		return res, fmt.Errorf("engine: documents stored, lexical index update failed (repaired on next open): %w", err)
	}
	ids = ids[:0]
	for _, d := range changed {
		ids = append(ids, d.ID)
	}
	if err := ix.Add(ctx, ids, vecs); err != nil {
		return res, fmt.Errorf("engine: documents stored, dense index update failed (repaired on next open): %w", err)
	}
	e.mu.Lock()
	e.dirty = true
	e.mu.Unlock()
	return res, nil
}

// Delete removes documents by id. Unknown ids are ignored. It returns the
// number of documents that existed.
func (e *Engine) Delete(ctx context.Context, ids []string) (int, error) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.store == nil {
		return 0, errClosed
	}
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
	seq, err := e.store.Delete(gone)
	if err != nil {
		return 0, fmt.Errorf("engine: deleting: %w", err)
	}
	if err := e.lex.Delete(ctx, gone, seq); err != nil {
		return len(gone), fmt.Errorf("engine: deleted from storage, lexical index update failed (repaired on next open): %w", err)
	}
	e.mu.RLock()
	ix := e.dense
	e.mu.RUnlock()
	if err := ix.Delete(gone); err != nil {
		return len(gone), fmt.Errorf("engine: deleted from storage, dense index update failed (repaired on next open): %w", err)
	}
	e.mu.Lock()
	e.dirty = true
	e.mu.Unlock()
	return len(gone), nil
}

var errClosed = fmt.Errorf("engine: closed")

// ErrEmptyDocument is returned for a document with neither title nor text:
// nothing could find it, and its embedding would be the model's response to
// no text at all, close to many queries. Tools skip such documents and count
// them (`annactl index`, `annactl eval`).
var ErrEmptyDocument = errors.New("empty title and text")

// IsEmpty reports whether d has no title and no text (whitespace only).
func IsEmpty(d Document) bool {
	return strings.TrimSpace(d.Title) == "" && strings.TrimSpace(d.Text) == ""
}

// validate rejects documents that cannot be stored, naming the offender.
func validate(docs []Document) error {
	for i, d := range docs {
		switch {
		case strings.TrimSpace(d.ID) == "":
			return fmt.Errorf("engine: document %d in batch: empty id", i)
		case !utf8.ValidString(d.ID):
			return fmt.Errorf("engine: document %d in batch: id is not valid UTF-8", i)
		case IsEmpty(d):
			return fmt.Errorf("engine: document %q: %w", d.ID, ErrEmptyDocument)
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

func sameDoc(a, b Document) bool {
	if a.Title != b.Title || a.Text != b.Text || len(a.Meta) != len(b.Meta) {
		return false
	}
	for k, v := range a.Meta {
		if w, ok := b.Meta[k]; !ok || w != v {
			return false
		}
	}
	return true
}
