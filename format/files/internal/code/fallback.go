//go:build !cgo

package code

import "context"

// parse has no parser without cgo: every language is cut at blank lines.
func parse(ctx context.Context, lang string, src []byte) ([]span, bool) { return nil, false }

// Parser names how code is cut in this build.
const Parser = "blank-line blocks (built without cgo: no tree-sitter)"
