package fetch

import (
	"io"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxHTMLDepth bounds how deep HTMLText walks the document (the parser
// itself nests at most 512 elements).
const maxHTMLDepth = 512

// HTMLText reduces an HTML document to its title and readable text: the
// text of the body without scripts, styles, navigation, forms and other
// chrome, one line per block (headings marked with '#', list items with
// '-'), whitespace collapsed, preformatted text kept as it is. The input
// is read as UTF-8; invalid bytes become U+FFFD.
func HTMLText(r io.Reader) (title, text string) {
	doc, err := html.Parse(r)
	if err != nil { // only a reader error: r is a bytes.Reader
		return "", ""
	}
	w := &textWriter{}
	w.walk(doc, 0)
	return strings.ToValidUTF8(strings.Join(strings.Fields(w.title), " "), "\uFFFD"),
		strings.ToValidUTF8(strings.TrimSpace(w.b.String()), "\uFFFD")
}

type textWriter struct {
	b       strings.Builder
	title   string
	space   bool // a space is due before the next word
	pre     int  // inside <pre>
	newline bool // the text ends with a line break (or is empty)
}

// skipped are elements whose content is not text a reader reads.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Math: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true, atom.Nav: true,
	atom.Form: true, atom.Button: true, atom.Select: true, atom.Textarea: true, atom.Input: true,
	atom.Footer: true, atom.Aside: true, atom.Head: true,
}

// blocks are elements that start and end a line.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true, atom.Header: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Ul: true, atom.Ol: true, atom.Li: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
	atom.Table: true, atom.Tr: true, atom.Blockquote: true, atom.Pre: true, atom.Figure: true,
	atom.Figcaption: true, atom.Hr: true, atom.Br: true, atom.Address: true, atom.Details: true, atom.Summary: true,
}

func (w *textWriter) walk(n *html.Node, depth int) {
	if depth > maxHTMLDepth {
		return
	}
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
		if n.DataAtom == atom.Head {
			w.findTitle(n, depth)
		}
		if skipped[n.DataAtom] || hidden(n) {
			return
		}
	}
	block := n.Type == html.ElementNode && blocks[n.DataAtom]
	if block {
		w.lineBreak()
		switch n.DataAtom {
		case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
			w.b.WriteString(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
			w.newline = false
		case atom.Li:
			w.b.WriteString("- ")
			w.newline = false
		case atom.Pre:
			w.pre++
		}
	}
	if n.Type == html.ElementNode && (n.DataAtom == atom.Td || n.DataAtom == atom.Th) {
		w.space = true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, depth+1)
	}
	if block {
		if n.DataAtom == atom.Pre {
			w.pre--
		}
		w.lineBreak()
	}
}

// findTitle sets the title from the first <title> under n.
func (w *textWriter) findTitle(n *html.Node, depth int) {
	if depth > maxHTMLDepth || w.title != "" {
		return
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		if c := n.FirstChild; c != nil && c.Type == html.TextNode {
			w.title = c.Data
		}
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.findTitle(c, depth+1)
	}
}

// hidden: an element marked hidden or aria-hidden.
func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		if a.Key == "hidden" || (a.Key == "aria-hidden" && a.Val == "true") {
			return true
		}
	}
	return false
}

func (w *textWriter) text(s string) {
	if w.pre > 0 {
		w.b.WriteString(s)
		w.newline = strings.HasSuffix(s, "\n")
		w.space = false
		return
	}
	if s != "" && isSpace(s[0]) {
		w.space = true
	}
	for i, f := range strings.Fields(s) {
		if (i > 0 || w.space) && !w.newline {
			w.b.WriteByte(' ')
		}
		w.b.WriteString(f)
		w.newline, w.space = false, false
	}
	if s != "" && isSpace(s[len(s)-1]) {
		w.space = true
	}
}

func (w *textWriter) lineBreak() {
	if w.b.Len() > 0 && !w.newline {
		w.b.WriteByte('\n')
	}
	w.newline, w.space = true, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
