// Package mail reads e-mail: a message (.eml) or a mailbox of them (.mbox,
// mboxo and mboxrd). A message's subject is its title (a mailbox's parts
// each carry their message's), its sender the author, its date the date;
// the text is the text/plain body (or the text/html one read as a web
// page), transfer encodings and charsets decoded, attachments left out.
package mail

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/anna-search/anna/format/files/internal/doc"
	"github.com/anna-search/anna/format/files/internal/html"
)

// maxDepth bounds nested multiparts.
const maxDepth = 8

// EML reads one message.
var EML = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	m, err := readMessage(in.Data)
	if err != nil {
		return doc.Doc{}, err
	}
	d := doc.Doc{Title: m.subject, Author: m.from, Date: m.date}
	text, cut := doc.Truncate(m.body, in.Limits.Or().MaxText)
	d.Truncated = cut
	for _, p := range doc.Blocks(doc.Lines(text), 1, doc.TargetPart) {
		p.StartLine, p.EndLine = 0, 0
		d.Parts = append(d.Parts, p)
	}
	if len(d.Parts) == 0 {
		if m.subject == "" {
			return doc.Doc{}, fmt.Errorf("%w: the message has no text", doc.ErrNoText)
		}
		d.Parts = []doc.Part{{Text: m.subject}}
	}
	return d, nil
})

// MBOX reads a mailbox: a part per message (a long one cut in blocks),
// each with its subject, sender and date.
var MBOX = doc.ReaderFunc(func(ctx context.Context, in doc.Input) (doc.Doc, error) {
	var d doc.Doc
	total, limit := 0, in.Limits.Or().MaxText
	n := 0
	bad := 0
	err := splitMbox(in.Data, func(raw []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n++
		m, err := readMessage(raw)
		if err != nil {
			bad++
			return nil
		}
		sec := fmt.Sprintf("message %d", n)
		for _, p := range doc.Blocks(doc.Lines(m.body), 1, doc.TargetPart) {
			if total += len(p.Text); total > limit {
				d.Truncated = true
				return io.EOF
			}
			p.StartLine, p.EndLine = 0, 0
			p.Title, p.Author, p.Date, p.Section = m.subject, m.from, m.date, sec
			d.Parts = append(d.Parts, p)
		}
		return nil
	})
	if err != nil && err != io.EOF {
		return doc.Doc{}, err
	}
	if len(d.Parts) == 0 {
		if bad > 0 {
			return doc.Doc{}, fmt.Errorf("%w: none of its %d messages could be read", doc.ErrCorrupt, bad)
		}
		return doc.Doc{}, fmt.Errorf("%w: no message holds text", doc.ErrNoText)
	}
	return d, nil
})

// splitMbox calls fn with each message of a mailbox (the "From " lines
// that separate them dropped, ">From " unquoted).
func splitMbox(data []byte, fn func([]byte) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var cur bytes.Buffer
	started := false
	flush := func() error {
		if started && cur.Len() > 0 {
			if err := fn(bytes.Clone(cur.Bytes())); err != nil {
				return err
			}
		}
		cur.Reset()
		return nil
	}
	for sc.Scan() {
		l := sc.Bytes()
		if bytes.HasPrefix(l, []byte("From ")) {
			if err := flush(); err != nil {
				return err
			}
			started = true
			continue
		}
		if !started {
			started = true // a mailbox without its first separator
		}
		if bytes.HasPrefix(bytes.TrimLeft(l, ">"), []byte("From ")) && l[0] == '>' {
			l = l[1:]
		}
		cur.Write(l)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", doc.ErrCorrupt, err)
	}
	return flush()
}

type message struct{ subject, from, date, body string }

var words = new(mime.WordDecoder)

func init() {
	words.CharsetReader = charset.NewReaderLabel
}

func header(h netmail.Header, key string) string {
	v := h.Get(key)
	if d, err := words.DecodeHeader(v); err == nil {
		v = d
	}
	if !utf8.ValidString(v) {
		// Raw 8-bit header (no RFC 2047 words): read like a text file's
		// bytes, Windows-1252 when not UTF-8.
		v, _ = doc.DecodeText([]byte(v))
	}
	return doc.Title(v)
}

func readMessage(raw []byte) (message, error) {
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return message{}, fmt.Errorf("%w: not a mail message: %v", doc.ErrCorrupt, err)
	}
	m := message{subject: header(msg.Header, "Subject"), from: header(msg.Header, "From")}
	if t, err := msg.Header.Date(); err == nil {
		m.date = t.Format(time.RFC3339)
	}
	plain, htmlBody := body(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0)
	switch {
	case strings.TrimSpace(plain) != "":
		m.body = plain
	case htmlBody != "":
		lines, _, _, err := html.Parse(strings.NewReader(htmlBody))
		if err == nil {
			m.body = strings.Join(lines, "\n")
		}
	}
	m.body = strings.ReplaceAll(doc.Normalize(m.body), "\r\n", "\n")
	return m, nil
}

// body is a (part of a) message's text/plain and text/html text,
// decoded; attachments are skipped.
func body(ctype, cte string, r io.Reader, depth int) (plain, htmlText string) {
	mt, params, err := mime.ParseMediaType(ctype)
	if ctype == "" || err != nil {
		mt, params = "text/plain", map[string]string{}
	}
	if strings.HasPrefix(mt, "multipart/") && depth < maxDepth {
		mr := multipart.NewReader(r, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				break
			}
			if disp, _, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition")); disp == "attachment" {
				continue
			}
			pl, ht := body(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, depth+1)
			if plain == "" {
				plain = pl
			}
			if htmlText == "" {
				htmlText = ht
			}
		}
		return plain, htmlText
	}
	if mt != "text/plain" && mt != "text/html" {
		return "", ""
	}
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: r})
	}
	b, _ := io.ReadAll(io.LimitReader(r, 64<<20))
	if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		if cr, err := charset.NewReaderLabel(cs, bytes.NewReader(b)); err == nil {
			if d, err := io.ReadAll(cr); err == nil {
				b = d
			}
		}
	}
	s, _ := doc.DecodeText(b)
	if mt == "text/html" {
		return "", s
	}
	return s, ""
}

// stripSpace drops the line breaks of base64 text.
type stripSpace struct{ r io.Reader }

func (s *stripSpace) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			p[j] = c
			j++
		}
	}
	return j, err
}
