package encoder

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/safe"
)

// Formatter is implemented by encoders that can say which exact text they
// feed the model for a document or a query; the cache keys by that text.
type Formatter interface {
	FormatDocument(d string) string
	FormatQuery(q string, p Prompt) string
}

// Cache wraps an Encoder with an on-disk embedding cache: one bbolt file
// per model fingerprint (dir/<fingerprint>.bolt), keyed by the sha256 of
// the exact text the model sees (for queries, the formatted prompt), values
// little-endian float32. Tests, evals and benchmarks share it, so a corpus
// such as SciFact is embedded once per model.
//
// The file is opened per call, read-only (shared lock) for lookups and
// read-write (exclusive lock) only to store new vectors, so several
// processes (parallel `go test` packages) can share it. Misses are embedded
// and stored in chunks, so an interrupted run keeps what it finished.
type Cache struct {
	enc    Encoder
	path   string
	mu     sync.Mutex // one open of the file at a time within this Cache
	hits   atomic.Int64
	misses atomic.Int64
}

var _ Encoder = (*Cache)(nil)

// cacheChunk is how many missing texts are embedded between writes.
const cacheChunk = 256

// lockTimeout bounds the wait for another process's write to the file.
const lockTimeout = 5 * time.Minute

var (
	bucketVectors = []byte("vectors")
	bucketMeta    = []byte("meta")
	safeName      = regexp.MustCompile(`^[0-9A-Za-z_.-]{1,128}$`)
)

// NewCache returns enc with a cache in dir ("" means
// home.CacheDir()/embeddings). enc's fingerprint must be non-empty.
func NewCache(enc Encoder, dir string) (*Cache, error) {
	fp := enc.Fingerprint()
	if fp == "" {
		return nil, errors.New("encoder cache: encoder has an empty fingerprint; cannot key a cache by it")
	}
	if enc.Dim() <= 0 {
		return nil, fmt.Errorf("encoder cache: encoder dim %d", enc.Dim())
	}
	if dir == "" {
		dir = home.EmbeddingCacheDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("encoder cache: %w", err)
	}
	name := fp
	if !safeName.MatchString(name) || name[0] == '.' {
		h := sha256.Sum256([]byte(fp))
		name = fmt.Sprintf("%x", h[:])
	}
	return &Cache{enc: enc, path: filepath.Join(dir, name+".bolt")}, nil
}

// Unwrap returns the encoder the cache wraps.
func (c *Cache) Unwrap() Encoder { return c.enc }

// Path is the cache file.
func (c *Cache) Path() string { return c.path }

// Dim is the wrapped encoder's.
func (c *Cache) Dim() int { return c.enc.Dim() }

// Fingerprint is the wrapped encoder's: cached vectors are the same vectors.
func (c *Cache) Fingerprint() string { return c.enc.Fingerprint() }

// Hits and Misses count texts served from the file and texts embedded.
func (c *Cache) Hits() int64   { return c.hits.Load() }
func (c *Cache) Misses() int64 { return c.misses.Load() }

// EmbedDocuments returns cached vectors and embeds (and stores) the rest.
func (c *Cache) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	return c.embed(ctx, texts, c.docKeys(texts), c.enc.EmbedDocuments)
}

// docKeys hashes the exact text the model sees for each document.
func (c *Cache) docKeys(texts []string) [][32]byte {
	f, _ := c.enc.(Formatter)
	keys := make([][32]byte, len(texts))
	for i, t := range texts {
		if f != nil {
			keys[i] = sha256.Sum256([]byte(f.FormatDocument(t)))
		} else {
			keys[i] = sha256.Sum256([]byte("document\x00" + t))
		}
	}
	return keys
}

// EmbedQueries returns cached vectors and embeds (and stores) the rest.
func (c *Cache) EmbedQueries(ctx context.Context, queries []string, p Prompt) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	f, _ := c.enc.(Formatter)
	var pj []byte
	if f == nil {
		pj, _ = json.Marshal(p)
	}
	keys := make([][32]byte, len(queries))
	for i, q := range queries {
		if f != nil {
			keys[i] = sha256.Sum256([]byte(f.FormatQuery(q, p)))
		} else {
			keys[i] = sha256.Sum256(append(append([]byte("query\x00"), pj...), "\x00"+q...))
		}
	}
	return c.embed(ctx, queries, keys, func(ctx context.Context, qs []string) ([][]float32, error) {
		return c.enc.EmbedQueries(ctx, qs, p)
	})
}

// PutDocuments stores vectors already computed by the wrapped encoder for
// documents texts (a benchmark that must time the encoder itself can still
// leave its vectors for later runs). vecs[i] belongs to texts[i].
func (c *Cache) PutDocuments(texts []string, vecs [][]float32) error {
	if len(texts) != len(vecs) {
		return fmt.Errorf("encoder cache: %d texts but %d vectors", len(texts), len(vecs))
	}
	keys := c.docKeys(texts)
	for lo := 0; lo < len(texts); lo += 4 * cacheChunk {
		hi := min(lo+4*cacheChunk, len(texts))
		if err := c.store(keys[lo:hi], vecs[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cache) embed(ctx context.Context, texts []string, keys [][32]byte, run func(context.Context, []string) ([][]float32, error)) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if err := c.lookup(keys, out); err != nil {
		return nil, err
	}
	// Missing texts, each distinct key once.
	var missText []string
	var missKey [][32]byte
	seen := map[[32]byte]bool{}
	for i, v := range out {
		if v == nil && !seen[keys[i]] {
			seen[keys[i]] = true
			missText = append(missText, texts[i])
			missKey = append(missKey, keys[i])
		}
	}
	c.hits.Add(int64(len(texts) - len(missText)))
	got := make(map[[32]byte][]float32, len(missText))
	for lo := 0; lo < len(missText); lo += cacheChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+cacheChunk, len(missText))
		vecs, err := run(ctx, missText[lo:hi])
		if err != nil {
			return nil, err
		}
		if len(vecs) != hi-lo {
			return nil, fmt.Errorf("encoder cache: encoder returned %d vectors for %d texts", len(vecs), hi-lo)
		}
		if err := c.store(missKey[lo:hi], vecs); err != nil {
			return nil, err
		}
		for j, v := range vecs {
			got[missKey[lo+j]] = v
		}
		c.misses.Add(int64(hi - lo))
	}
	for i := range out {
		if out[i] == nil {
			out[i] = got[keys[i]]
		}
	}
	return out, nil
}

// lookup fills out[i] for every key found.
func (c *Cache) lookup(keys [][32]byte, out [][]float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	db, err := bolt.Open(c.path, 0o644, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing cached yet
	}
	if err != nil {
		return fmt.Errorf("encoder cache: opening %s (a cache: delete it if it is damaged): %w", c.path, err)
	}
	defer db.Close()
	dim := c.enc.Dim()
	return db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVectors)
		if b == nil {
			return nil
		}
		for i, k := range keys {
			v := b.Get(k[:])
			if len(v) != 4*dim {
				continue // absent, or written by a different dim: re-embed
			}
			vec := make([]float32, dim)
			for j := range vec {
				vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(v[4*j:]))
			}
			out[i] = vec
		}
		return nil
	})
}

func (c *Cache) store(keys [][32]byte, vecs [][]float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	db, err := bolt.Open(c.path, 0o644, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return fmt.Errorf("encoder cache: opening %s (a cache: delete it if it is damaged): %w", c.path, err)
	}
	defer db.Close()
	dim := c.enc.Dim()
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("fingerprint"), []byte(c.enc.Fingerprint())); err != nil {
			return err
		}
		if err := meta.Put([]byte("dim"), binary.LittleEndian.AppendUint32(nil, uint32(dim))); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists(bucketVectors)
		if err != nil {
			return err
		}
		for i, v := range vecs {
			if len(v) != dim {
				return fmt.Errorf("vector %d has %d dims, encoder says %d", i, len(v), dim)
			}
			// bbolt keeps key and value slices until commit: fresh ones each.
			buf := make([]byte, 4*dim)
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			if err := b.Put(append([]byte(nil), keys[i][:]...), buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("encoder cache: writing %s: %w", c.path, err)
	}
	return nil
}
