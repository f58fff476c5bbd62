package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"

	"github.com/anna-search/anna/filter"
)

// Every value anna writes carries a CRC-32C trailer over a tag, the key and
// the value's body (see doc.go), so a damaged byte anywhere in a record is
// caught when the record is read, and a record found loose in the file (by
// Salvage) proves which bucket it belongs to and that it is whole.
const (
	tagDoc    = 'D'
	tagVector = 'V'
	tagChange = 'C'
	tagState  = 'S'

	crcSize = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealed returns body followed by the CRC-32C of tag, scope, key and body.
// scope distinguishes records of the same tag in different buckets (the
// model fingerprint of a vector); it is "" for the others.
func sealed(tag byte, scope string, key, body []byte) []byte {
	out := make([]byte, len(body), len(body)+crcSize)
	copy(out, body)
	return binary.LittleEndian.AppendUint32(out, recordSum(tag, scope, key, body))
}

func recordSum(tag byte, scope string, key, body []byte) uint32 {
	h := crc32.Update(0, castagnoli, []byte{tag})
	if scope != "" {
		h = crc32.Update(h, castagnoli, []byte(scope))
		h = crc32.Update(h, castagnoli, []byte{0})
	}
	h = crc32.Update(h, castagnoli, key)
	return crc32.Update(h, castagnoli, body)
}

// errChecksum is wrapped (with ErrCorrupt) by every failed unseal.
var errChecksum = errors.New("checksum mismatch")

// unsealed checks raw's trailer and returns its body (aliasing raw).
func unsealed(tag byte, scope string, key, raw []byte) ([]byte, error) {
	if len(raw) < crcSize {
		return nil, fmt.Errorf("%w: record of %d bytes is shorter than its checksum", ErrCorrupt, len(raw))
	}
	body := raw[:len(raw)-crcSize]
	if binary.LittleEndian.Uint32(raw[len(body):]) != recordSum(tag, scope, key, body) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, errChecksum)
	}
	return body, nil
}

// docVersion tags the doc encoding. Version 2 added the seq and the
// checksum; version 1 stores are refused by Open (see storeFormat).
// Version 3 adds the document's MetaValues after its Meta; a document
// without MetaValues is still written as version 2, byte for byte as
// before, so directories holding only string metadata stay readable by
// the binaries that knew only version 2. Version 4 adds the document's
// Language after the MetaValues (their count written even when 0), and is
// written only for a document given a language, so directories without
// any stay readable by the binaries before it. All three are read.
const (
	docVersion         = 2
	docVersionValues   = 3
	docVersionLanguage = 4
)

// Tags of a value in a version 3 doc record.
const (
	valString = 's' // string
	valNumber = 'n' // float64 bits, little-endian
	valList   = 'l' // uvarint count, then that many string or number values
)

// encodeDoc writes version, seq (the change that last set the text), title,
// text, then the meta pairs sorted by key, every string as uvarint length +
// bytes, and in version 3 the MetaValues sorted by key (uvarint count, then
// key and tagged value each), sealed with the doc's ID. Binary rather than
// JSON so any bytes round-trip exactly (JSON would replace invalid UTF-8).
func encodeDoc(d Doc, seq uint64) []byte {
	n := 1 + 3*binary.MaxVarintLen64 + len(d.Title) + len(d.Text) + 2*binary.MaxVarintLen64
	keys := make([]string, 0, len(d.Meta))
	for k, v := range d.Meta {
		keys = append(keys, k)
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	sort.Strings(keys)
	vkeys := make([]string, 0, len(d.MetaValues))
	for k, v := range d.MetaValues {
		vkeys = append(vkeys, k)
		n += 2*binary.MaxVarintLen64 + len(k) + 1
		for _, e := range v.Values() {
			n += 1 + binary.MaxVarintLen64 + len(e.String())
		}
	}
	sort.Strings(vkeys)
	version := byte(docVersion)
	if len(vkeys) > 0 {
		version = docVersionValues
	}
	if d.Language != "" {
		version = docVersionLanguage
		n += binary.MaxVarintLen64 + len(d.Language)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, version)
	buf = binary.AppendUvarint(buf, seq)
	buf = appendString(buf, d.Title)
	buf = appendString(buf, d.Text)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		buf = appendString(buf, k)
		buf = appendString(buf, d.Meta[k])
	}
	if version >= docVersionValues {
		buf = binary.AppendUvarint(buf, uint64(len(vkeys)))
		for _, k := range vkeys {
			buf = appendString(buf, k)
			buf = appendValue(buf, d.MetaValues[k])
		}
	}
	if version == docVersionLanguage {
		buf = appendString(buf, d.Language)
	}
	return sealed(tagDoc, "", []byte(d.ID), buf)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendValue(buf []byte, v filter.Value) []byte {
	switch v.Kind() {
	case filter.KindNumber:
		x, _ := v.Number()
		buf = append(buf, valNumber)
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
	case filter.KindList:
		elems := v.List()
		buf = append(buf, valList)
		buf = binary.AppendUvarint(buf, uint64(len(elems)))
		for _, e := range elems {
			buf = appendValue(buf, e)
		}
		return buf
	}
	s, _ := v.Str()
	return appendString(append(buf, valString), s)
}

// decodeDoc reads a doc record stored under id, with the seq of the change
// that last set its text.
func decodeDoc(id string, raw []byte) (Doc, uint64, error) {
	body, err := unsealed(tagDoc, "", []byte(id), raw)
	if err != nil {
		return Doc{}, 0, fmt.Errorf("doc %q: %w", id, err)
	}
	if len(body) == 0 || body[0] < docVersion || body[0] > docVersionLanguage {
		return Doc{}, 0, fmt.Errorf("doc %q: %w: unknown encoding", id, ErrCorrupt)
	}
	r := reader{buf: body[1:]}
	seq := r.uvarint()
	d := Doc{ID: id, Title: r.string(), Text: r.string()}
	if n := r.uvarint(); n > 0 && r.err == nil {
		if n > uint64(len(r.buf)) {
			return Doc{}, 0, fmt.Errorf("doc %q: %w: meta count %d", id, ErrCorrupt, n)
		}
		d.Meta = make(map[string]string, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := r.string()
			d.Meta[k] = r.string()
		}
	}
	if body[0] >= docVersionValues && r.err == nil {
		n := r.uvarint()
		if n > uint64(len(r.buf)) {
			return Doc{}, 0, fmt.Errorf("doc %q: %w: value count %d", id, ErrCorrupt, n)
		}
		if n > 0 {
			d.MetaValues = make(map[string]filter.Value, n)
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := r.string()
			d.MetaValues[k] = r.value(true)
		}
	}
	if body[0] == docVersionLanguage && r.err == nil {
		d.Language = r.string()
	}
	if r.err == nil && len(r.buf) != 0 {
		r.err = fmt.Errorf("%d bytes after the record", len(r.buf))
	}
	if r.err != nil {
		return Doc{}, 0, fmt.Errorf("doc %q: %w: %w", id, ErrCorrupt, r.err)
	}
	return d, seq, nil
}

// encodeVector writes the seq of the change that stored the embedding, the
// number of passages and each passage's span (uvarints), then every
// passage's components as little-endian float32, sealed with fp and the
// doc ID. All vectors of an embedding have the same dimension.
func encodeVector(fp, id string, seq uint64, e Embedding) []byte {
	dim := 0
	if len(e.Vectors) > 0 {
		dim = len(e.Vectors[0])
	}
	body := make([]byte, 8, 8+binary.MaxVarintLen64*(1+2*len(e.Spans))+4*dim*len(e.Vectors))
	binary.LittleEndian.PutUint64(body, seq)
	body = binary.AppendUvarint(body, uint64(len(e.Vectors)))
	for _, sp := range e.Spans {
		body = binary.AppendUvarint(body, uint64(sp.Start))
		body = binary.AppendUvarint(body, uint64(sp.End))
	}
	for _, v := range e.Vectors {
		for _, f := range v {
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(f))
		}
	}
	return sealed(tagVector, fp, []byte(id), body)
}

func decodeVector(fp, id string, raw []byte) (Embedding, uint64, error) {
	body, err := unsealed(tagVector, fp, []byte(id), raw)
	if err != nil {
		return Embedding{}, 0, err
	}
	bad := func(what string) (Embedding, uint64, error) {
		return Embedding{}, 0, fmt.Errorf("%w: vector record of %d bytes: %s", ErrCorrupt, len(body), what)
	}
	if len(body) < 9 {
		return bad("too short")
	}
	seq := binary.LittleEndian.Uint64(body)
	r := reader{buf: body[8:]}
	n := r.uvarint()
	if r.err != nil || n == 0 || n > uint64(len(body)) {
		return bad("passage count")
	}
	e := Embedding{Spans: make([]Span, n), Vectors: make([][]float32, n)}
	for i := range e.Spans {
		start, end := r.uvarint(), r.uvarint()
		if r.err != nil || start > end || end > 1<<40 {
			return bad("passage span")
		}
		e.Spans[i] = Span{int(start), int(end)}
	}
	if len(r.buf)%(4*int(n)) != 0 || len(r.buf) == 0 {
		return bad("vector length")
	}
	dim := len(r.buf) / 4 / int(n)
	flat := make([]float32, dim*int(n))
	for i := range flat {
		flat[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.buf[4*i:]))
	}
	for i := range e.Vectors {
		e.Vectors[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return e, seq, nil
}

// encodeChange writes op, the seq of the doc's last text change (for
// OpVectors entries, so an index of text can skip them), and the ID, sealed
// with the entry's key.
func encodeChange(key []byte, op Op, textSeq uint64, id string) []byte {
	body := make([]byte, 0, 1+binary.MaxVarintLen64+len(id))
	body = append(body, byte(op))
	body = binary.AppendUvarint(body, textSeq)
	body = append(body, id...)
	return sealed(tagChange, "", key, body)
}

func decodeChange(key, raw []byte) (Change, error) {
	if len(key) != 8 {
		return Change{}, fmt.Errorf("%w: change key %x is not 8 bytes", ErrCorrupt, key)
	}
	body, err := unsealed(tagChange, "", key, raw)
	if err != nil {
		return Change{}, fmt.Errorf("change %d: %w", binary.BigEndian.Uint64(key), err)
	}
	c := Change{Seq: binary.BigEndian.Uint64(key)}
	if len(body) < 2 {
		return Change{}, fmt.Errorf("change %d: %w: short entry", c.Seq, ErrCorrupt)
	}
	c.Op = Op(body[0])
	if c.Op != OpPut && c.Op != OpDelete && c.Op != OpVectors {
		return Change{}, fmt.Errorf("change %d: %w: unknown op %q", c.Seq, ErrCorrupt, body[0])
	}
	ts, n := binary.Uvarint(body[1:])
	if n <= 0 {
		return Change{}, fmt.Errorf("change %d: %w: bad text seq", c.Seq, ErrCorrupt)
	}
	c.TextSeq, c.ID = ts, string(body[1+n:])
	if c.ID == "" {
		return Change{}, fmt.Errorf("change %d: %w: empty id", c.Seq, ErrCorrupt)
	}
	return c, nil
}

// encodeState writes a state value with the version of the transaction
// that wrote it (the state bucket's sequence), so that Salvage can tell the
// newest of several copies; a deleted key keeps a tombstone (val nil).
func encodeState(key string, version uint64, val []byte) []byte {
	body := binary.AppendUvarint(nil, version)
	if val == nil {
		body = append(body, 0)
	} else {
		body = append(body, 1)
		body = append(body, val...)
	}
	return sealed(tagState, "", []byte(key), body)
}

// decodeState returns the value (nil for a tombstone) and its version.
func decodeState(key string, raw []byte) ([]byte, uint64, error) {
	body, err := unsealed(tagState, "", []byte(key), raw)
	if err != nil {
		return nil, 0, fmt.Errorf("state %q: %w", key, err)
	}
	version, n := binary.Uvarint(body)
	if n <= 0 || len(body) < n+1 || body[n] > 1 {
		return nil, 0, fmt.Errorf("state %q: %w: malformed", key, ErrCorrupt)
	}
	if body[n] == 0 {
		return nil, version, nil
	}
	return body[n+1:], version, nil
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

type reader struct {
	buf []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err = errors.New("corrupt length")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// value reads a tagged value (a list only when list is set: lists do not
// nest).
func (r *reader) value(list bool) filter.Value {
	if r.err != nil {
		return filter.Value{}
	}
	if len(r.buf) == 0 {
		r.err = errors.New("value overruns record")
		return filter.Value{}
	}
	tag := r.buf[0]
	r.buf = r.buf[1:]
	switch {
	case tag == valString:
		return filter.StringValue(r.string())
	case tag == valNumber:
		if len(r.buf) < 8 {
			r.err = errors.New("number overruns record")
			return filter.Value{}
		}
		x := math.Float64frombits(binary.LittleEndian.Uint64(r.buf))
		r.buf = r.buf[8:]
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r.err = fmt.Errorf("number %v", x)
		}
		return filter.NumberValue(x)
	case tag == valList && list:
		n := r.uvarint()
		if n > uint64(len(r.buf)) {
			r.err = fmt.Errorf("list of %d values overruns record", n)
			return filter.Value{}
		}
		elems := make([]filter.Value, 0, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			elems = append(elems, r.value(false))
		}
		return filter.ListValue(elems...)
	}
	r.err = fmt.Errorf("unknown value tag %q", tag)
	return filter.Value{}
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.buf)) {
		r.err = fmt.Errorf("string of %d bytes overruns record", n)
		return ""
	}
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}
