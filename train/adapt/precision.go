package adapt

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// indexManifest is the manifest of the model the index is bound to, and
// its directory.
func indexManifest(eng *engine.Engine) (string, *model.Manifest, error) {
	// Dir is "" for an index of the default model; FindModel resolves that,
	// and a model moved since, by its fingerprint.
	dir, err := engine.FindModel(eng.Model())
	if err != nil {
		return "", nil, err
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, man, nil
}

// served is the model the check scores and the reindex serves: the
// student as trained (Report.Model, float32) for an index whose model is
// float32; for an index whose model is int8 (its manifest's
// Quantization), the student converted to int8 as `annactl models import
// --quantize int8` converts (onnx.Import with Settings.Quantize, from the
// student's exported checkpoint, the float32 student's Source), into
// Report.Model + "-int8". The index's precision and the served model are
// recorded (Report.Precision, Report.Served) and saved in adapt.json once
// the conversion is whole, so the check run again and the reindex reuse
// it; the conversion writes beside its destination and renames, so a
// stop during it leaves no model, and it runs again.
func (r *run) served(ctx context.Context, eng *engine.Engine) (string, error) {
	rep := &r.st.Report
	if rep.Served != "" {
		if m, err := model.LoadManifest(rep.Served); err == nil && m.Quantization == rep.Precision {
			return rep.Served, nil
		}
	}
	_, idx, err := indexManifest(eng)
	if err != nil {
		return "", fmt.Errorf("adapt: the index's model (its precision is kept): %w", err)
	}
	out := rep.Model
	switch idx.Quantization {
	case "":
	case model.QuantizeInt8:
		if out, err = r.quantize(ctx, rep.Model); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("adapt: the index's model %s is %s; adapt keeps an index at float32 or %s", idx.Name, idx.Quantization, model.QuantizeInt8)
	}
	rep.Precision, rep.Served = idx.Quantization, out
	if err := r.st.Save(); err != nil {
		return "", err
	}
	return out, nil
}

// quantize converts the float32 student in dir to int8 into dir + "-int8"
// (replacing what is there), with the float32 student's settings (name
// NAME-int8, pooling, length, normalisation, prefixes, source).
func (r *run) quantize(ctx context.Context, dir string) (string, error) {
	m, err := model.LoadManifest(dir)
	if err != nil {
		return "", fmt.Errorf("adapt: the adapted model: %w", err)
	}
	src, err := catalog.Checkpoint(ctx, dir, catalog.Options{})
	if err != nil {
		return "", fmt.Errorf("adapt: the adapted model's checkpoint, to convert to %s from: %w", model.QuantizeInt8, err)
	}
	dest := dir + "-" + model.QuantizeInt8
	r.report("int8 conversion", 0, 1)
	r.logf("the index's model is %s: converting the adapted model to %s (%s) for the check and the reindex", model.QuantizeInt8, model.QuantizeInt8, dest)
	norm := m.Normalize
	s := onnx.Settings{Name: m.Name + "-" + model.QuantizeInt8, Task: m.Task, Pooling: m.Pooling, MaxLength: m.MaxLength, Normalize: &norm,
		QueryPrefix: m.QueryPrefix, DocumentPrefix: m.DocumentPrefix, InstructionTemplate: m.InstructionTemplate, Source: src,
		Quantize: model.QuantizeInt8, Context: m.Context, Memory: m.Memory}
	q, err := onnx.Import(ctx, src, dest, s)
	if err != nil {
		return "", fmt.Errorf("adapt: converting the adapted model to %s: %w", model.QuantizeInt8, err)
	}
	if q.Quantization != model.QuantizeInt8 {
		return "", fmt.Errorf("adapt: the %s conversion of the adapted model (%s) records quantization %q", model.QuantizeInt8, dest, q.Quantization)
	}
	r.report("int8 conversion", 1, 1)
	return dest, nil
}

// precisionName names a quantization for people: "float32" for "".
func precisionName(q string) string {
	if q == "" {
		return "float32"
	}
	return q
}

// storedVectors gives the check the index's stored vector of a candidate
// text where it is exactly what the check would embed with the index's
// model: the text is a document's whole embedded text (engine.EmbedText:
// title and text, as the miner wrote it) and the index holds that
// document as one vector — it fit the model's window, and the engine
// embedded EmbedText whole (engine's embedDocs), as the check's
// EmbedDocuments does, truncation included. Anything else is embedded as
// before: a positive the inverse-cloze cut changed, and a document the
// index split into passages (the check scores a candidate by its
// truncated whole text, not by its best passage, and the student has no
// passages to compare with).
type storedVectors struct {
	eng  *engine.Engine
	seed maphash.Seed
	ids  map[uint64][]string // maphash of EmbedText -> documents
	hits int
}

// newStoredVectors hashes every document's embedded text (read, not
// embedded: a small cost beside the check's embedding).
func newStoredVectors(ctx context.Context, eng *engine.Engine) (*storedVectors, error) {
	s := &storedVectors{eng: eng, seed: maphash.MakeSeed(), ids: map[uint64][]string{}}
	ids, err := eng.Teacher().IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("adapt: listing the index's documents: %w", err)
	}
	for i := 0; i < len(ids); i += 256 {
		docs, err := eng.Get(ctx, ids[i:min(i+256, len(ids))]...)
		if err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		for _, d := range docs {
			h := maphash.String(s.seed, engine.EmbedText(d))
			s.ids[h] = append(s.ids[h], d.ID)
		}
	}
	return s, nil
}

// lookup returns the stored vector of the document whose embedded text is
// text, when the index holds it as one vector.
func (s *storedVectors) lookup(ctx context.Context, text string) ([]float32, bool, error) {
	for _, id := range s.ids[maphash.String(s.seed, text)] {
		docs, err := s.eng.Get(ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("adapt: %w", err)
		}
		if len(docs) == 0 || engine.EmbedText(docs[0]) != text {
			continue
		}
		v, ok, err := s.eng.Teacher().Vectors(id)
		if err != nil {
			return nil, false, fmt.Errorf("adapt: %w", err)
		}
		if ok && len(v) == 1 {
			s.hits++
			return v[0], true, nil
		}
	}
	return nil, false, nil
}
