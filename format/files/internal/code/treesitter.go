//go:build cgo

package code

import (
	"context"
	"strings"
	"time"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/c"
	"github.com/smacker/go-tree-sitter/cpp"
	"github.com/smacker/go-tree-sitter/golang"
	"github.com/smacker/go-tree-sitter/java"
	"github.com/smacker/go-tree-sitter/javascript"
	"github.com/smacker/go-tree-sitter/python"
	"github.com/smacker/go-tree-sitter/rust"
	"github.com/smacker/go-tree-sitter/typescript/tsx"
	"github.com/smacker/go-tree-sitter/typescript/typescript"
)

// Parser names how code is cut in this build.
const Parser = "tree-sitter (Go, Python, JavaScript, TypeScript, TSX, Rust, Java, C, C++); blank-line blocks for the rest"

// grammars are the tree-sitter languages, by the name Languages gives.
var grammars = map[string]func() *sitter.Language{
	"go": golang.GetLanguage, "python": python.GetLanguage, "javascript": javascript.GetLanguage,
	"typescript": typescript.GetLanguage, "tsx": tsx.GetLanguage, "rust": rust.GetLanguage,
	"java": java.GetLanguage, "c": c.GetLanguage, "cpp": cpp.GetLanguage,
}

// parseTimeout bounds one file's parse (tree-sitter is linear, but a
// pathological file should not hold a folder up).
const parseTimeout = 10 * time.Second

// definitions are the node types that make a part, per language; bodies
// are the node types whose children are definitions in turn (a class's
// methods), searched when the definition is too large for one part.
var definitions = map[string]bool{
	// Go
	"function_declaration": true, "method_declaration": true, "type_declaration": true,
	// Python
	"function_definition": true, "class_definition": true, "decorated_definition": true,
	// JavaScript, TypeScript
	"generator_function_declaration": true, "class_declaration": true, "abstract_class_declaration": true,
	"interface_declaration": true, "type_alias_declaration": true, "enum_declaration": true,
	"method_definition": true, "internal_module": true, "module": true,
	// Rust
	"function_item": true, "struct_item": true, "enum_item": true, "trait_item": true, "impl_item": true,
	"mod_item": true, "macro_definition": true, "union_item": true, "type_item": true,
	// Java
	"record_declaration": true, "constructor_declaration": true, "annotation_type_declaration": true,
	// C, C++
	"struct_specifier": true, "class_specifier": true, "union_specifier": true, "enum_specifier": true,
	"namespace_definition": true, "template_declaration": true, "preproc_function_def": true,
}

// wrappers hold one definition and say nothing themselves: the definition
// inside names the part ("export function f", "@decorator def f").
var wrappers = map[string]bool{"export_statement": true, "decorated_definition": true, "template_declaration": true}

// bodies are the children lists a large definition is split along.
var bodies = map[string]bool{
	"class_body": true, "block": true, "declaration_list": true, "field_declaration_list": true,
	"interface_body": true, "enum_body": true, "statement_block": true, "object_type": true,
}

func parse(ctx context.Context, lang string, src []byte) ([]span, bool) {
	get, ok := grammars[lang]
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, parseTimeout)
	defer cancel()
	p := sitter.NewParser()
	defer p.Close()
	p.SetLanguage(get())
	tree, err := p.ParseCtx(ctx, nil, src)
	if err != nil || tree == nil {
		return nil, false
	}
	defer tree.Close()
	w := walker{src: src}
	w.children(tree.RootNode(), "")
	return w.spans, true
}

type walker struct {
	src   []byte
	spans []span
}

// children adds the definitions among n's named children (prefix: the
// enclosing definition's symbol and a dot).
func (w *walker) children(n *sitter.Node, prefix string) {
	count := int(n.NamedChildCount())
	comment := -1 // the first line of the comments just above the next child
	lastEnd := -2
	for i := 0; i < count; i++ {
		c := n.NamedChild(i)
		if c == nil {
			continue
		}
		from, to := int(c.StartPoint().Row), int(c.EndPoint().Row)
		if c.EndPoint().Column == 0 && to > from {
			to-- // a node ending at a line's start ends on the line before
		}
		if strings.Contains(c.Type(), "comment") {
			if comment < 0 || from > lastEnd+1 {
				comment = from
			}
			lastEnd = to
			continue
		}
		start := from
		if comment >= 0 && lastEnd >= from-1 {
			start = comment
		}
		comment, lastEnd = -1, to
		if !w.definition(c) {
			continue
		}
		name := prefix + w.name(c)
		if int(c.EndByte()-c.StartByte()) > 2*3000 {
			if body := w.body(c); body != nil {
				before := len(w.spans)
				bodyStart := int(body.StartPoint().Row)
				if bodyStart > start {
					w.spans = append(w.spans, span{from: start, to: bodyStart, symbol: name})
				}
				w.children(body, name+".")
				if len(w.spans) > before+1 || bodyStart <= start {
					continue
				}
				w.spans = w.spans[:before] // nothing inside to cut along: keep it whole
			}
		}
		w.spans = append(w.spans, span{from: start, to: to, symbol: name})
	}
}

// definition reports whether c is a definition: its type's, or a
// declaration of a function value (const f = () => ...).
func (w *walker) definition(c *sitter.Node) bool {
	t := c.Type()
	if definitions[t] {
		return true
	}
	switch t {
	case "export_statement":
		if d := c.ChildByFieldName("declaration"); d != nil {
			return true
		}
	case "lexical_declaration", "variable_declaration":
		for i := 0; i < int(c.NamedChildCount()); i++ {
			if v := c.NamedChild(i); v != nil && v.Type() == "variable_declarator" {
				if val := v.ChildByFieldName("value"); val != nil && (strings.Contains(val.Type(), "function") || val.Type() == "arrow_function" || val.Type() == "class") {
					return true
				}
			}
		}
	case "function_definition", "declaration":
		return t == "function_definition"
	}
	return false
}

// name is a definition's symbol: its name field, a Go method's receiver
// type and name, a declarator's identifier, or a wrapped definition's.
func (w *walker) name(c *sitter.Node) string {
	if wrappers[c.Type()] {
		for i := 0; i < int(c.NamedChildCount()); i++ {
			if d := c.NamedChild(i); d != nil && w.definition(d) {
				return w.name(d)
			}
		}
	}
	switch c.Type() {
	case "method_declaration":
		if r := c.ChildByFieldName("receiver"); r != nil && c.ChildByFieldName("name") != nil {
			if typ := findType(r, "type_identifier"); typ != nil {
				return typ.Content(w.src) + "." + c.ChildByFieldName("name").Content(w.src)
			}
		}
	case "type_declaration":
		if s := findType(c, "type_spec"); s != nil {
			if n := s.ChildByFieldName("name"); n != nil {
				return n.Content(w.src)
			}
		}
	case "impl_item":
		typ := c.ChildByFieldName("type")
		if tr := c.ChildByFieldName("trait"); tr != nil && typ != nil {
			return tr.Content(w.src) + " for " + typ.Content(w.src)
		}
		if typ != nil {
			return typ.Content(w.src)
		}
	case "lexical_declaration", "variable_declaration":
		if v := findType(c, "variable_declarator"); v != nil {
			if n := v.ChildByFieldName("name"); n != nil {
				return n.Content(w.src)
			}
		}
	}
	if n := c.ChildByFieldName("name"); n != nil {
		return oneLine(n.Content(w.src))
	}
	for d := c.ChildByFieldName("declarator"); d != nil; d = d.ChildByFieldName("declarator") {
		switch d.Type() {
		case "identifier", "field_identifier", "qualified_identifier", "destructor_name", "operator_name", "type_identifier":
			return oneLine(d.Content(w.src))
		}
	}
	return ""
}

// body is the child of c whose children are definitions (a class body).
func (w *walker) body(c *sitter.Node) *sitter.Node {
	if b := c.ChildByFieldName("body"); b != nil && bodies[b.Type()] {
		return b
	}
	for i := 0; i < int(c.NamedChildCount()); i++ {
		d := c.NamedChild(i)
		if d == nil {
			continue
		}
		if bodies[d.Type()] {
			return d
		}
		if wrappers[c.Type()] && w.definition(d) {
			return w.body(d)
		}
	}
	return nil
}

// findType is the first node of type t under n, depth first.
func findType(n *sitter.Node, t string) *sitter.Node {
	for i := 0; i < int(n.NamedChildCount()); i++ {
		c := n.NamedChild(i)
		if c == nil {
			continue
		}
		if c.Type() == t {
			return c
		}
		if f := findType(c, t); f != nil {
			return f
		}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
