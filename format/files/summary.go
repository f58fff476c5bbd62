package files

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Summary is the line a folder's reading ends with: how many files were
// read and every file not read, grouped by extension and reason, most
// first ("312 read, 18 skipped: 12 .png (binary), 4 .pdf (no text layer),
// 2 .zip (unsupported); supported: ..."). skipped are the files not read
// (Skip set); the formats read are named when one was unsupported.
func Summary(read int, skipped []File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d read", read)
	if len(skipped) == 0 {
		return b.String()
	}
	type key struct{ ext, why string }
	counts := map[key]int{}
	unsupported := false
	for _, f := range skipped {
		counts[key{f.Ext(), f.Skip}]++
		unsupported = unsupported || f.Skip == "unsupported"
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(counts[b]-counts[a], strings.Compare(a.ext, b.ext), strings.Compare(a.why, b.why))
	})
	fmt.Fprintf(&b, ", %d skipped: ", len(skipped))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s (%s)", counts[k], k.ext, k.why)
	}
	if unsupported {
		b.WriteString("; supported: " + Supported())
	}
	return b.String()
}

// Supported names the extensions read, source code summed up.
func Supported() string {
	var exts []string
	for _, f := range formats {
		if f.Name == "code" {
			continue
		}
		exts = append(exts, f.Extensions...)
	}
	code, _ := Lookup("x.go")
	return strings.Join(exts, " ") + ", files without an extension that hold text, and source code (" +
		fmt.Sprint(len(code.Extensions)) + " extensions: docs/formats.md)"
}
