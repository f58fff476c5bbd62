package engine

// Teacher is the engine's face for the tools that teach and check models
// with a directory beside searching it: mining's teacher and the
// adaptation loop (train/adapt, train/recipe), which score documents
// against a query by BM25 (LexicalScores), read the stored vectors
// (Vectors) and every ID (IDs), and embed with the engine's own model
// (LoadEncoder); and the tools that make a directory hold exactly a
// collection (annactl index --sync: DeleteExcept). They are kept off
// Engine so that its method set stays what a search application needs.
//
// A Teacher is a view of its engine, not a copy: it is as safe for
// concurrent use as the engine, and its calls answer ErrClosed once the
// engine is closed (or when it is nil).
type Teacher struct{ e *Engine }

// Teacher returns the engine's teacher-only methods (see Teacher).
func (e *Engine) Teacher() Teacher { return Teacher{e} }
