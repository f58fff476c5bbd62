package lexical

import (
	"context"
	"fmt"
	"maps"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/safe"
)

// ForEachID calls fn with the ID of every indexed document, in no
// particular order, from one snapshot of the index.
func (ix *Index) ForEachID(ctx context.Context, fn func(id string) error) error {
	ctx = safe.Ctx(ctx)
	return ix.ForEachMatching(ctx, filter.Filter{}, fn)
}

// Check verifies what the index keeps beside Bleve's postings: the field
// statistics BM25 normalises by must equal the sum of the field lengths
// stored with each document, and every document must have its lengths. It
// returns one message per problem (none for a sound index).
func (ix *Index) Check(ctx context.Context) ([]string, error) {
	ctx = safe.Ctx(ctx)
	r, err := ix.bi.Advanced()
	if err != nil {
		return nil, fmt.Errorf("lexical: check: %w", err)
	}
	reader, err := r.Reader()
	if err != nil {
		return nil, fmt.Errorf("lexical: check: %w", err)
	}
	defer reader.Close()
	var problems []string
	st, err := readStats(reader)
	if err != nil {
		problems = append(problems, err.Error())
	}
	var sum [len(fields)]uint64
	langs := map[string]uint64{}
	var missing []string
	nMissing := 0
	err = ix.ForEachID(ctx, func(id string) error {
		l, language, ok, err := storedLens(reader, id)
		if err != nil || !ok {
			if nMissing++; len(missing) < 20 {
				missing = append(missing, id)
			}
			return nil
		}
		for f := range fields {
			sum[f] += l[f]
		}
		langs[language]++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if nMissing > 0 {
		problems = append(problems, fmt.Sprintf("%d document(s) indexed without readable field lengths: %q", nMissing, missing))
	}
	for f, name := range fields {
		if sum[f] != st.Len[f] {
			problems = append(problems, fmt.Sprintf("field %q: statistics say %d tokens, the documents' lengths add up to %d", name, st.Len[f], sum[f]))
		}
	}
	if st.Langs != nil && !maps.Equal(st.Langs, langs) {
		problems = append(problems, fmt.Sprintf("languages: statistics say %v, the documents say %v", st.Langs, langs))
	}
	return problems, nil
}
