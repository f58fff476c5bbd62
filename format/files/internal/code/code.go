// Package code reads source code: a part per function, method, class or
// type (with the comments above it), named by its symbol, with the
// language and line range; the code between definitions (imports,
// constants) in blocks of lines. Where cgo is on, tree-sitter parses Go,
// Python, JavaScript, TypeScript (and TSX), Rust, Java, C and C++
// (treesitter.go); elsewhere, and for every other language the table
// names, the code is cut at blank lines (doc.Blocks) and a block's symbol
// is the first definition a line-pattern finds in it (fallback.go).
package code

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/internal/safe"
)

// Languages maps a file extension (lower case, with the dot) to the
// language its code is in; Names maps file names without an extension.
var Languages = map[string]string{
	".go": "go", ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
	".jsx": "javascript", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
	".rs": "rust", ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp",
	".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".ipp": "cpp",
	".rb": "ruby", ".php": "php", ".cs": "csharp", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift",
	".scala": "scala", ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "shell", ".ps1": "powershell",
	".lua": "lua", ".pl": "perl", ".pm": "perl", ".r": "r", ".jl": "julia", ".sql": "sql", ".css": "css",
	".scss": "scss", ".less": "less", ".vue": "vue", ".svelte": "svelte", ".dart": "dart", ".ex": "elixir",
	".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml", ".clj": "clojure",
	".el": "elisp", ".lisp": "lisp", ".scm": "scheme", ".zig": "zig", ".nim": "nim", ".m": "objc", ".mm": "objc",
	".proto": "protobuf", ".graphql": "graphql", ".tf": "hcl", ".hcl": "hcl", ".cmake": "cmake", ".mk": "make",
	".gradle": "groovy", ".groovy": "groovy", ".tex": "latex", ".bib": "bibtex",
	".json": "json", ".jsonc": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini",
	".cfg": "ini", ".conf": "config", ".xml": "xml", ".csv": "csv", ".tsv": "tsv",
}

// Names maps file names that carry no extension to their language.
var Names = map[string]string{
	"Makefile": "make", "makefile": "make", "GNUmakefile": "make", "Dockerfile": "dockerfile",
	"Containerfile": "dockerfile", "Jenkinsfile": "groovy", "Rakefile": "ruby", "Gemfile": "ruby",
	"Vagrantfile": "ruby", "CMakeLists.txt": "cmake", "BUILD": "starlark", "WORKSPACE": "starlark",
}

// Language is the language of the file named name, or "".
func Language(name string) string {
	if l, ok := Names[path.Base(name)]; ok {
		return l
	}
	return Languages[strings.ToLower(path.Ext(name))]
}

// maxParsed is the largest file tree-sitter parses; a larger one (a
// generated or minified file) is cut at blank lines.
const maxParsed = 2 << 20

// span is a definition's lines (0-based, end inclusive) and symbol.
type span struct {
	from, to int
	symbol   string
}

// Reader reads source code; the language comes from the file's name.
var Reader = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) { return Read(ctx, in) })

// Read reads one source file.
func Read(ctx context.Context, in doc.Input) (doc.Doc, error) {
	ctx = safe.Ctx(ctx)
	if doc.IsBinary(in.Data) {
		return doc.Doc{}, fmt.Errorf("%w: a NUL byte in its first bytes", doc.ErrBinary)
	}
	lang := Language(in.Name)
	s, enc := doc.DecodeText(in.Data)
	d := doc.Doc{Encoding: enc}
	s, d.Truncated = doc.Truncate(s, in.Limits.Or().MaxText)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := doc.Lines(s)
	var spans []span
	parsed := false
	if len(s) <= maxParsed {
		spans, parsed = parse(ctx, lang, []byte(s))
	}
	if !parsed {
		spans = patternSpans(lang, lines)
	}
	d.Parts = build(lines, spans, lang)
	if len(d.Parts) == 0 {
		return doc.Doc{}, fmt.Errorf("%w: white space only", doc.ErrNoText)
	}
	return d, nil
}

// build makes the parts: a part per definition span (one too large cut
// into blocks, each keeping the symbol), tiny neighbours joined, and the
// lines between definitions in blocks.
func build(lines []string, spans []span, lang string) []doc.Part {
	var parts []doc.Part
	next := 0
	gap := func(to int) {
		if to > next {
			parts = append(parts, doc.Blocks(lines[next:to], next+1, doc.TargetPart)...)
		}
	}
	for _, sp := range spans {
		if sp.from < next || sp.to >= len(lines) || sp.to < sp.from {
			continue
		}
		gap(sp.from)
		text := strings.Join(lines[sp.from:sp.to+1], "\n")
		if len(text) > 2*doc.TargetPart {
			for _, b := range doc.Blocks(lines[sp.from:sp.to+1], sp.from+1, doc.TargetPart) {
				b.Symbol = sp.symbol
				parts = append(parts, b)
			}
		} else if strings.TrimSpace(text) != "" {
			p := doc.Part{Text: text, Symbol: sp.symbol, StartLine: sp.from + 1, EndLine: sp.to + 1}
			if n := len(parts); n > 0 && joinable(parts[n-1], p) {
				q := &parts[n-1]
				q.Text += "\n" + strings.Join(lines[q.EndLine:sp.to+1], "\n")
				q.EndLine = p.EndLine
				q.Symbol += ", " + p.Symbol
			} else {
				parts = append(parts, p)
			}
		}
		next = sp.to + 1
	}
	gap(len(lines))
	for i := range parts {
		parts[i].Code = lang
	}
	return parts
}

// smallDef is the size under which neighbouring definitions share a part.
const smallDef = doc.TargetPart / 6

// joinable says whether p may join the part before it, q: both small
// definitions, at most a blank line apart.
func joinable(q, p doc.Part) bool {
	return q.Symbol != "" && p.Symbol != "" && len(q.Text) < smallDef && len(p.Text) < smallDef &&
		p.StartLine-q.EndLine <= 2 && len(q.Text)+len(p.Text) < doc.TargetPart/2 && strings.Count(q.Symbol, ",") < 4
}

// defPatterns find a definition's name on one line, per language family:
// what the blocks of the fallback are named by.
var defPatterns = map[string]*regexp.Regexp{
	"go":         regexp.MustCompile(`^func\s+(?:\(\s*\w+\s+\*?(\w+)[^)]*\)\s*)?(\w+)|^type\s+(\w+)`),
	"python":     regexp.MustCompile(`^\s*(?:async\s+)?(?:def|class)\s+(\w+)`),
	"javascript": regexp.MustCompile(`^\s*(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\*?|class)\s+(\w+)|^\s*(?:export\s+)?(?:const|let|var)\s+(\w+)\s*=\s*(?:async\s*)?(?:function|\([^)]*\)\s*=>|\w+\s*=>)`),
	"rust":       regexp.MustCompile(`^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:fn|struct|enum|trait|mod|type|union)\s+(\w+)|^\s*impl(?:<[^>]*>)?\s+(?:[\w:]+\s+for\s+)?([\w:]+)`),
	"java":       regexp.MustCompile(`^\s*(?:(?:public|private|protected|static|final|abstract|sealed|synchronized|native|default)\s+)*(?:class|interface|enum|record|@interface)\s+(\w+)|^\s*(?:(?:public|private|protected|static|final|abstract|synchronized|native|default)\s+)+[\w<>\[\],\s]+?\s+(\w+)\s*\(`),
	"c":          regexp.MustCompile(`^(?:[A-Za-z_][\w\s\*]*?[\s\*])?([A-Za-z_]\w*)\s*\([^;]*$|^(?:typedef\s+)?(?:struct|union|enum|class|namespace)\s+(\w+)`),
	"ruby":       regexp.MustCompile(`^\s*(?:def|class|module)\s+([\w.:?!]+)`),
	"shell":      regexp.MustCompile(`^\s*(?:function\s+)?([\w-]+)\s*\(\)\s*\{?`),
	"kotlin":     regexp.MustCompile(`^\s*(?:[\w]+\s+)*(?:fun|class|object|interface)\s+(\w+)`),
	"swift":      regexp.MustCompile(`^\s*(?:[\w]+\s+)*(?:func|class|struct|enum|protocol|extension)\s+(\w+)`),
	"php":        regexp.MustCompile(`^\s*(?:[\w]+\s+)*(?:function|class|interface|trait)\s+(\w+)`),
	"csharp":     regexp.MustCompile(`^\s*(?:(?:public|private|protected|internal|static|sealed|abstract|partial|async|override|virtual)\s+)*(?:class|interface|struct|enum|record)\s+(\w+)`),
}

// family is the pattern set a language is matched with.
func family(lang string) *regexp.Regexp {
	switch lang {
	case "typescript", "tsx", "vue", "svelte":
		lang = "javascript"
	case "cpp", "objc":
		lang = "c"
	case "scala", "groovy", "dart":
		lang = "java"
	}
	return defPatterns[lang]
}

// patternSpans finds definitions without a parser: a block of lines (cut
// at blank lines, doc.Blocks) is named by the definitions a pattern finds
// on its lines (at most 8, joined by ", ").
func patternSpans(lang string, lines []string) []span {
	re := family(lang)
	var spans []span
	for _, b := range doc.Blocks(lines, 1, doc.TargetPart) {
		sp := span{from: b.StartLine - 1, to: b.EndLine - 1}
		if n := len(spans); n > 0 && sp.from <= spans[n-1].to {
			continue // a piece of a line too long for one part: its span is there
		}
		if re != nil {
			var names []string
			for _, l := range lines[sp.from : sp.to+1] {
				if m := re.FindStringSubmatch(l); m != nil && len(names) < 8 {
					names = append(names, symbolOf(m))
				}
			}
			sp.symbol = strings.Join(names, ", ")
		}
		spans = append(spans, sp)
	}
	return spans
}

// symbolOf joins a pattern's non-empty groups: "Recv.Method" for Go.
func symbolOf(m []string) string {
	var names []string
	for _, g := range m[1:] {
		if g != "" {
			names = append(names, g)
		}
	}
	return strings.Join(names, ".")
}
