package encoder

// Passage is one window of a document as an encoder embeds it.
type Passage struct {
	// Text is what is embedded: the prefix (the document's title and a
	// space) and the window of the text.
	Text string
	// Start and End are the window's byte range in the text (the text as
	// the tokenizer reads it: the same bytes unless it holds invalid UTF-8
	// or NUL bytes, which it replaces or drops).
	Start, End int
}

// Splitter is implemented by encoders that can cut a long document into
// the windows they embed, so that no part of it goes unseen (Model
// does). An encoder that does not implement it truncates a document to
// what it reads.
type Splitter interface {
	// MaxLength is how many tokens the model reads (the default window).
	MaxLength() int
	// Split cuts text into passages of at most window model tokens each,
	// the special tokens and prefix included, every next window starting
	// stride tokens of text further (stride < window overlaps them). A
	// text that fits is one passage, prefix + text. An empty text gives
	// none.
	Split(prefix, text string, window, stride int) []Passage
}

var _ Splitter = (*Model)(nil)

// Split implements Splitter with the model's own tokenizer. The prefix
// and the special tokens ([CLS], [SEP]) take their room in every window;
// a prefix that would leave less than a quarter of a window for the text
// is given no room (the window is then truncated at embedding, as before).
func (e *Model) Split(prefix, text string, window, stride int) []Passage {
	tok := e.m.Tokenizer()
	specials := len(tok.Encode("", 0).IDs)
	room := window - specials - tok.Count(prefix)
	if room < window/4 {
		room = max(1, window/4)
	}
	clean, ws := tok.Windows(text, room, stride)
	out := make([]Passage, len(ws))
	for i, w := range ws {
		out[i] = Passage{Text: prefix + clean[w.Start:w.End], Start: w.Start, End: w.End}
	}
	return out
}

// SplitterOf returns the Splitter behind enc, looking through wrappers (an
// encoder wrapping another has an Unwrap() Encoder method, as Cache does),
// and false when there is none.
func SplitterOf(enc Encoder) (Splitter, bool) {
	for enc != nil {
		if s, ok := enc.(Splitter); ok {
			return s, true
		}
		u, ok := enc.(interface{ Unwrap() Encoder })
		if !ok {
			return nil, false
		}
		enc = u.Unwrap()
	}
	return nil, false
}
