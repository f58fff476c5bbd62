package weaviate

import (
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// State is what a collection records about the anna store it derives from.
type State struct {
	StoreID   string `json:"store"`     // the store's identity (storage.Store.ID)
	Seq       uint64 `json:"seq"`       // the last store change applied
	VectorKey string `json:"vectorKey"` // model fingerprint and chunking of the vectors
}

// Collection is one generation of the alias's collections.
type Collection struct {
	c    *Client
	name string
}

// Name is the collection's Weaviate class name.
func (co *Collection) Name() string { return co.name }

// Collection returns the collection called name (no request is sent).
func (c *Client) Collection(name string) *Collection { return &Collection{c: c, name: name} }

// Resolve returns the collection the alias points at; ok is false when
// the alias does not exist.
func (c *Client) Resolve(ctx context.Context) (co *Collection, ok bool, err error) {
	ctx = safe.Ctx(ctx)
	var a struct {
		Class string `json:"class"`
	}
	err = c.doWithin(ctx, quick, "reading alias "+c.cfg.Alias, "", http.MethodGet, "/v1/aliases/"+url.PathEscape(c.cfg.Alias), nil, &a)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return c.Collection(a.Class), true, nil
}

// Generations lists the alias's collections (Alias_gN), oldest first.
func (c *Client) Generations(ctx context.Context) ([]*Collection, error) {
	ctx = safe.Ctx(ctx)
	var schema struct {
		Classes []struct {
			Class string `json:"class"`
		} `json:"classes"`
	}
	if err := c.doWithin(ctx, quick, "listing collections", "", http.MethodGet, "/v1/schema", nil, &schema); err != nil {
		return nil, err
	}
	type gen struct {
		n    int
		name string
	}
	var gens []gen
	prefix := c.cfg.Alias + "_g"
	for _, cl := range schema.Classes {
		if n, err := strconv.Atoi(strings.TrimPrefix(cl.Class, prefix)); err == nil && strings.HasPrefix(cl.Class, prefix) && n > 0 {
			gens = append(gens, gen{n, cl.Class})
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i].n < gens[j].n })
	out := make([]*Collection, len(gens))
	for i, g := range gens {
		out[i] = c.Collection(g.name)
	}
	return out, nil
}

// Create makes the next generation's collection (empty, no vectorizer,
// cosine HNSW, BM25 k1 1.2 b 0.75) and returns it. The alias is not moved.
func (c *Client) Create(ctx context.Context) (*Collection, error) {
	ctx = safe.Ctx(ctx)
	gens, err := c.Generations(ctx)
	if err != nil {
		return nil, err
	}
	n := 1
	if len(gens) > 0 {
		last := gens[len(gens)-1].name
		n, _ = strconv.Atoi(strings.TrimPrefix(last, c.cfg.Alias+"_g"))
		n++
	}
	name := fmt.Sprintf("%s_g%d", c.cfg.Alias, n)
	f, t := false, true
	type prop struct {
		Name            string   `json:"name"`
		DataType        []string `json:"dataType"`
		Tokenization    string   `json:"tokenization,omitempty"`
		IndexFilterable *bool    `json:"indexFilterable"`
		IndexSearchable *bool    `json:"indexSearchable,omitempty"`
	}
	class := map[string]any{
		"class":               name,
		"description":         "anna: documents' passages with anna's vectors (internal/index/weaviate)",
		"vectorizer":          "none",
		"vectorIndexType":     "hnsw",
		"vectorIndexConfig":   map[string]any{"distance": "cosine", "skipDefaultQuantization": true},
		"invertedIndexConfig": map[string]any{"bm25": map[string]any{"k1": 1.2, "b": 0.75}},
		"properties": []prop{
			{Name: "docId", DataType: []string{"text"}, Tokenization: "field", IndexFilterable: &t, IndexSearchable: &f},
			{Name: "passage", DataType: []string{"int"}, IndexFilterable: &t},
			{Name: "title", DataType: []string{"text"}, Tokenization: "word", IndexFilterable: &f, IndexSearchable: &t},
			{Name: "text", DataType: []string{"text"}, Tokenization: "word", IndexFilterable: &f, IndexSearchable: &t},
			{Name: "meta", DataType: []string{"text[]"}, Tokenization: "field", IndexFilterable: &t, IndexSearchable: &f},
			{Name: "annaState", DataType: []string{"text"}, Tokenization: "field", IndexFilterable: &f, IndexSearchable: &f},
		},
	}
	if c.cfg.Replication > 0 {
		// Asynchronous replication brings a replica that was down up to
		// date with the writes it missed (Weaviate resolves a write's
		// consistency level over the replicas that are up).
		class["replicationConfig"] = map[string]any{"factor": c.cfg.Replication, "asyncEnabled": c.cfg.Replication > 1}
	}
	if err := c.do(ctx, "creating collection", name, http.MethodPost, "/v1/schema", class, nil); err != nil {
		return nil, err
	}
	return c.Collection(name), c.waitSchema(ctx, name)
}

// waitSchema waits until every node that answers has applied the creation
// of collection name (the schema travels by Raft: a node that has not yet
// applied it refuses objects for the collection).
func (c *Client) waitSchema(ctx context.Context, name string) error {
	deadline := time.Now().Add(time.Minute)
	for _, u := range c.cfg.URLs {
		for {
			err := c.send(ctx, u+"/v1/schema/"+url.PathEscape(name)+"?consistency=false", http.MethodGet, nil, nil)
			var e *Error
			if err == nil || (errors.As(err, &e) && e.Status == 0 && ctx.Err() == nil) {
				break // in step, or down: the writes will say
			}
			if !errors.Is(err, ErrNotFound) || time.Now().After(deadline) {
				if e != nil {
					e.Op, e.Collection = "waiting for the collection on every node", name
				}
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Point makes the alias name co, creating the alias when it does not
// exist; readers of the alias move over in that one call.
func (c *Client) Point(ctx context.Context, co *Collection) error {
	ctx = safe.Ctx(ctx)
	_, ok, err := c.Resolve(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return c.doWithin(ctx, quick, "creating alias "+c.cfg.Alias, co.name, http.MethodPost, "/v1/aliases",
			map[string]string{"alias": c.cfg.Alias, "class": co.name}, nil)
	}
	return c.doWithin(ctx, quick, "moving alias "+c.cfg.Alias, co.name, http.MethodPut, "/v1/aliases/"+url.PathEscape(c.cfg.Alias),
		map[string]string{"class": co.name}, nil)
}

// Drop deletes the collection and everything in it.
func (co *Collection) Drop(ctx context.Context) error {
	ctx = safe.Ctx(ctx)
	return co.c.do(ctx, "dropping collection", co.name, http.MethodDelete, "/v1/schema/"+url.PathEscape(co.name), nil, nil)
}

// stateID is the fixed id of the state object.
var stateID = objectID("\x00anna-state", 0)

// objectID derives a name-based UUID (version 5 layout, SHA-1) from a
// document id and a passage number.
func objectID(doc string, passage int) string {
	h := sha1.New()
	h.Write([]byte("anna/weaviate\x00"))
	h.Write([]byte(doc))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(passage)))
	s := h.Sum(nil)[:16]
	s[6] = s[6]&0x0f | 0x50
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// State reads the collection's state; ok is false when it has none (a
// collection being created).
func (co *Collection) State(ctx context.Context) (st State, ok bool, err error) {
	ctx = safe.Ctx(ctx)
	var obj struct {
		Properties struct {
			AnnaState string `json:"annaState"`
		} `json:"properties"`
	}
	path := "/v1/objects/" + url.PathEscape(co.name) + "/" + stateID + "?consistency_level=" + co.c.cfg.WriteConsistency
	err = co.c.doWithin(ctx, quick, "reading anna's state object", co.name, http.MethodGet, path, nil, &obj)
	if errors.Is(err, ErrNotFound) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, err
	}
	if err := json.Unmarshal([]byte(obj.Properties.AnnaState), &st); err != nil {
		return State{}, false, fmt.Errorf("weaviate: collection %s: anna's state object is unreadable: %w", co.name, err)
	}
	return st, true, nil
}

// SetState records st in the collection.
func (co *Collection) SetState(ctx context.Context, st State) error {
	ctx = safe.Ctx(ctx)
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return co.batch(ctx, "recording anna's state", []object{{Class: co.name, ID: stateID, Properties: map[string]any{"annaState": string(raw)}}})
}

type object struct {
	Class      string         `json:"class"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	Vector     []float32      `json:"vector,omitempty"`
}

// batchSize is how many objects one batch request carries.
const batchSize = 128

// batch upserts objects, failing on the first object Weaviate did not
// store.
func (co *Collection) batch(ctx context.Context, op string, objs []object) error {
	for start := 0; start < len(objs); start += batchSize {
		part := objs[start:min(start+batchSize, len(objs))]
		type result struct {
			ID     string `json:"id"`
			Result struct {
				Errors *struct {
					Error []struct {
						Message string `json:"message"`
					} `json:"error"`
				} `json:"errors"`
			} `json:"result"`
		}
		var res []result
		path := "/v1/batch/objects?consistency_level=" + co.c.cfg.WriteConsistency
		var failed int
		var first string
		for attempt := 0; ; attempt++ {
			res = nil // decoding into old elements would keep their errors
			if err := co.c.do(ctx, op, co.name, http.MethodPost, path, map[string]any{"objects": part}, &res); err != nil {
				return err
			}
			failed, first = 0, ""
			for _, r := range res {
				if r.Result.Errors != nil && len(r.Result.Errors.Error) > 0 {
					if failed == 0 {
						first = r.Result.Errors.Error[0].Message
					}
					failed++
				}
			}
			// A node that has applied a new collection's schema may not
			// have loaded its shards yet: that passes in a moment.
			if failed == 0 || !strings.Contains(first, "could not find index for class") || attempt == 40 {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		if failed > 0 {
			return &Error{URL: co.c.cfg.URLs[0] + "/v1/batch/objects", Collection: co.name, Op: op,
				Msg: fmt.Sprintf("%d of %d objects not stored, the first because: %s", failed, len(part), first), Err: errors.New("batch failed")}
		}
		if len(res) != len(part) {
			return &Error{URL: co.c.cfg.URLs[0] + "/v1/batch/objects", Collection: co.name, Op: op,
				Msg: fmt.Sprintf("%d results for %d objects", len(res), len(part)), Err: errors.New("batch failed")}
		}
	}
	return nil
}

// MetaSeparator joins a metadata key and value in the meta property.
const MetaSeparator = "\x1f"

func metaTerms(meta map[string]string) []string {
	out := make([]string, 0, len(meta))
	for k, v := range meta {
		if strings.Contains(k, MetaSeparator) {
			continue // no filter can name it
		}
		out = append(out, k+MetaSeparator+v)
	}
	sort.Strings(out)
	return out
}

// Upsert writes docs with their embeddings (one object per passage) and
// removes passages a document no longer has. Sent again, it writes the
// same objects.
func (co *Collection) Upsert(ctx context.Context, docs []storage.Doc, embs []storage.Embedding) error {
	ctx = safe.Ctx(ctx)
	if len(docs) != len(embs) {
		return fmt.Errorf("weaviate: upsert into %s: %d documents, %d embeddings", co.name, len(docs), len(embs))
	}
	had, err := co.extraPassages(ctx, docs)
	if err != nil {
		return err
	}
	var objs []object
	byCount := map[int][]string{} // passage count -> documents that had more passages
	for i, d := range docs {
		if len(embs[i].Vectors) == 0 {
			return fmt.Errorf("weaviate: upsert into %s: document %q has no vector", co.name, d.ID)
		}
		meta := metaTerms(d.Meta)
		for p, v := range embs[i].Vectors {
			props := map[string]any{"docId": d.ID, "passage": p, "meta": meta}
			if p == 0 {
				props["title"], props["text"] = d.Title, d.Text
			}
			objs = append(objs, object{Class: co.name, ID: objectID(d.ID, p), Properties: props, Vector: v})
		}
		if n := len(embs[i].Vectors); had[d.ID] >= n {
			byCount[n] = append(byCount[n], d.ID)
		}
	}
	if err := co.batch(ctx, "batch upsert", objs); err != nil {
		return err
	}
	for n, ids := range byCount {
		w := and(docIn(ids), where{Operator: "GreaterThanEqual", Path: []string{"passage"}, ValueInt: &n})
		if err := co.deleteWhere(ctx, "removing passages past the documents' end", w); err != nil {
			return err
		}
	}
	return nil
}

// extraPassages returns, for each of docs that the collection holds with
// more than one passage, its last passage number. Only those can lose
// passages in an upsert, so a fresh ingest deletes nothing (Weaviate 1.35
// refuses a batch delete across shards while one replica is down).
func (co *Collection) extraPassages(ctx context.Context, docs []storage.Doc) (map[string]int, error) {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	one := 1
	w := and(docIn(ids), where{Operator: "GreaterThanEqual", Path: []string{"passage"}, ValueInt: &one})
	args, err := co.args(w)
	if err != nil {
		return nil, err
	}
	const limit = 10000
	q := fmt.Sprintf(`{Get{%s(limit: %d%s){docId passage}}}`, co.name, limit, args)
	var hits []gqlHit
	if err := co.graphQL(ctx, "reading the documents' passages", q, &hits); err != nil {
		return nil, err
	}
	out := make(map[string]int)
	if len(hits) == limit { // too many to trust the list: clean every document
		for _, id := range ids {
			out[id] = math.MaxInt
		}
		return out, nil
	}
	for _, h := range hits {
		out[h.DocID] = max(out[h.DocID], h.Passage)
	}
	return out, nil
}

// Delete removes every passage of the documents ids.
func (co *Collection) Delete(ctx context.Context, ids []string) error {
	ctx = safe.Ctx(ctx)
	for start := 0; start < len(ids); start += batchSize {
		if err := co.deleteWhere(ctx, "batch delete", docIn(ids[start:min(start+batchSize, len(ids))])); err != nil {
			return err
		}
	}
	return nil
}

func (co *Collection) deleteWhere(ctx context.Context, op string, w where) error {
	var res struct {
		Results struct {
			Failed  int `json:"failed"`
			Matches int `json:"matches"`
			Limit   int `json:"limit"`
		} `json:"results"`
	}
	body := map[string]any{"match": map[string]any{"class": co.name, "where": w}, "output": "minimal"}
	path := "/v1/batch/objects?consistency_level=" + co.c.cfg.WriteConsistency
	if err := co.c.do(ctx, op, co.name, http.MethodDelete, path, body, &res); err != nil {
		return err
	}
	if res.Results.Failed > 0 {
		return &Error{URL: co.c.cfg.URLs[0] + "/v1/batch/objects", Collection: co.name, Op: op,
			Msg: fmt.Sprintf("%d of %d objects not deleted", res.Results.Failed, res.Results.Matches), Err: errors.New("batch delete failed")}
	}
	if res.Results.Limit > 0 && res.Results.Matches >= res.Results.Limit {
		return co.deleteWhere(ctx, op, w) // more than one call's limit matched
	}
	return nil
}

func docIn(ids []string) where {
	return where{Operator: "ContainsAny", Path: []string{"docId"}, ValueTextArray: ids}
}

func and(ws ...where) where { return where{Operator: "And", Operands: ws} }

// DropAll removes the alias and every one of its collections.
func (c *Client) DropAll(ctx context.Context) error {
	ctx = safe.Ctx(ctx)
	err := c.doWithin(ctx, quick, "removing alias "+c.cfg.Alias, "", http.MethodDelete, "/v1/aliases/"+url.PathEscape(c.cfg.Alias), nil, nil)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	gens, err := c.Generations(ctx)
	if err != nil {
		return err
	}
	for _, g := range gens {
		if err := g.Drop(ctx); err != nil {
			return err
		}
	}
	return nil
}

// IDs lists the documents the collection holds (those with a passage 0),
// paging through it with Weaviate's cursor.
func (co *Collection) IDs(ctx context.Context) ([]string, error) {
	ctx = safe.Ctx(ctx)
	var out []string
	after := ""
	for {
		cursor := ""
		if after != "" {
			cursor = ", after: " + gqlString(after)
		}
		q := fmt.Sprintf(`{Get{%s(limit: 1000%s){docId passage _additional{id}}}}`, co.name, cursor)
		var hits []struct {
			DocID      string `json:"docId"`
			Passage    *int   `json:"passage"`
			Additional struct {
				ID string `json:"id"`
			} `json:"_additional"`
		}
		if err := co.graphQL(ctx, "listing objects", q, &hits); err != nil {
			return nil, err
		}
		for _, h := range hits {
			if h.Passage != nil && *h.Passage == 0 {
				out = append(out, h.DocID)
			}
		}
		if len(hits) < 1000 {
			sort.Strings(out)
			return out, nil
		}
		after = hits[len(hits)-1].Additional.ID
	}
}
