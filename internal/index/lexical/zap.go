package lexical

import (
	"github.com/blevesearch/bleve/v2/index/scorch"

	zap "github.com/anna-search/anna/internal/third_party/zapx"
)

// Segments are written and read by anna's copy of zap v17, registered in
// place of Bleve's (the package doc says why; the format is the same).
// Scorch's own init, which registers Bleve's copy, runs before this one.
func init() { scorch.RegisterSegmentPlugin(&zap.ZapPlugin{}, true) }
