package doc

import (
	"strings"
)

// TargetPart is the size a part aims at, in bytes: the text of a few
// passages of the model's window (256 tokens, about 1,000 bytes of
// English), small enough that a hit's location names a screenful, large
// enough that a part carries its context.
const TargetPart = 3000

// Heading is a heading of a text: the line it is on (1-based, of the text
// given to Sections), its level (1 the highest) and its title.
type Heading struct {
	Line, Level int
	Title       string
}

// Lines splits s into lines without their "\n" (a last line without one
// counted; "" is no line).
func Lines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.Split(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// Sections cuts lines (numbered from first) into parts at heads (in line
// order): a part per section, its Section the path of headings it is under
// ("Install › Linux"), its lines the section's. A section over twice
// target is cut into blocks of lines (Blocks); consecutive small sections
// are joined up to target, the part named by the first heading. Parts of
// white space only are left out.
func Sections(lines []string, first int, heads []Heading, target int) []Part {
	type sec struct {
		from, to int // line indexes, to exclusive
		label    string
	}
	var secs []sec
	var stack []Heading
	start, label := 0, ""
	for _, h := range heads {
		i := h.Line - 1
		if i < start || i >= len(lines) {
			continue
		}
		if i > start {
			secs = append(secs, sec{start, i, label})
		}
		for len(stack) > 0 && stack[len(stack)-1].Level >= h.Level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, h)
		names := make([]string, len(stack))
		for j, s := range stack {
			names[j] = s.Title
		}
		start, label = i, strings.Join(names, " › ")
	}
	if start < len(lines) {
		secs = append(secs, sec{start, len(lines), label})
	}
	var parts []Part
	var cur *Part
	for _, s := range secs {
		text := strings.Join(lines[s.from:s.to], "\n")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if len(text) > 2*target {
			cur = nil
			for _, b := range Blocks(lines[s.from:s.to], first+s.from, target) {
				b.Section = s.label
				parts = append(parts, b)
			}
			continue
		}
		p := Part{Text: text, Section: s.label, StartLine: first + s.from, EndLine: first + s.to - 1}
		if cur != nil && cur.EndLine+1 == p.StartLine && len(cur.Text) < target/8 && len(cur.Text)+1+len(text) <= target {
			cur.Text += "\n" + text
			cur.EndLine = p.EndLine
			if cur.Section == "" {
				cur.Section = p.Section
			}
			continue
		}
		parts = append(parts, p)
		cur = &parts[len(parts)-1]
	}
	return trimParts(parts, lines, first)
}

// Blocks cuts lines (numbered from first) into parts of about target bytes
// at blank lines: paragraphs, or a program's blocks, kept whole where they
// fit; a block larger than target is cut between lines, and a line larger
// than target between runes.
func Blocks(lines []string, first, target int) []Part {
	var parts []Part
	var b strings.Builder
	from := -1
	flush := func(to int) {
		if from >= 0 && strings.TrimSpace(b.String()) != "" {
			parts = append(parts, Part{Text: b.String(), StartLine: first + from, EndLine: first + to})
		}
		b.Reset()
		from = -1
	}
	blank := true
	for i, l := range lines {
		isBlank := strings.TrimSpace(l) == ""
		// A paragraph begins after a blank line: cut before it once the
		// part is near its target; cut anywhere once it is over.
		if from >= 0 && ((blank && !isBlank && b.Len() >= target/2 && b.Len()+len(l) > target) || b.Len()+len(l) > 2*target) {
			flush(i - 1)
		}
		blank = isBlank
		for len(l) > 2*target {
			head, _ := Truncate(l, target)
			if head == "" {
				break
			}
			if from < 0 {
				from = i
			} else {
				b.WriteByte('\n')
			}
			b.WriteString(head)
			flush(i)
			l = l[len(head):]
		}
		if from < 0 {
			from = i
		} else {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	flush(len(lines) - 1)
	return trimParts(parts, lines, first)
}

// trimParts drops the blank lines at either end of each part, moving its
// line range with them.
func trimParts(parts []Part, lines []string, first int) []Part {
	out := parts[:0]
	for _, p := range parts {
		if p.StartLine > 0 && p.EndLine >= p.StartLine {
			for p.StartLine < p.EndLine && strings.TrimSpace(lines[p.StartLine-first]) == "" {
				_, p.Text, _ = strings.Cut(p.Text, "\n")
				p.StartLine++
			}
			for p.EndLine > p.StartLine && strings.TrimSpace(lines[p.EndLine-first]) == "" {
				if i := strings.LastIndexByte(p.Text, '\n'); i >= 0 {
					p.Text = p.Text[:i]
				}
				p.EndLine--
			}
		}
		if strings.TrimSpace(p.Text) != "" {
			out = append(out, p)
		}
	}
	return out
}

// Joined is the text of parts as one string, for readers whose whole text
// is wanted (and tests).
func Joined(parts []Part) string {
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, "\n\n")
}
