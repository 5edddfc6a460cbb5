package openai

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/model"
)

// Tool names on the wire. Conclave's tool names may hold dots (an MCP
// server's tools are "server.tool"), which the Chat Completions API
// refuses: a function name must match ^[a-zA-Z0-9_-]{1,64}$ (OpenAI,
// Azure; a 400 "string does not match pattern" otherwise), and Gemini's
// OpenAI endpoint also wants it to start with a letter or an underscore.
// Each request maps every name it sends (the tools offered and the names
// of earlier calls in its history) to such a name, and maps the names of
// the calls the model makes back. The mapping is a function of the set of
// names alone, so every turn of an agent sends the same wire names.
//
// A name already valid is kept; another has each '.' replaced by "__"
// and any other character outside the pattern by '_', gets a "t_" prefix
// when it does not start with a letter or '_', is cut to 64 bytes, and
// takes a "_2", "_3"… suffix when that collides with another name.

// wireName is a name the API accepts as is.
var wireName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// maxWireName is the API's limit on a function name.
const maxWireName = 64

// wireNames is one request's mapping (see above).
type wireNames struct {
	toWire   map[string]string
	fromWire map[string]string
}

// wireNamesOf is the mapping of req's names: the tools offered and the
// calls of its earlier turns.
func wireNamesOf(req model.Request) *wireNames {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	for _, ex := range req.History {
		for _, c := range ex.Calls {
			names = append(names, c.Name)
		}
	}
	return newWireNames(names)
}

func newWireNames(names []string) *wireNames {
	slices.Sort(names)
	names = slices.Compact(names)
	w := &wireNames{toWire: make(map[string]string, len(names)), fromWire: make(map[string]string, len(names))}
	take := func(name, wire string) {
		w.toWire[name], w.fromWire[wire] = wire, name
	}
	var mapped []string
	for _, n := range names { // valid names first: they keep themselves
		if wireName.MatchString(n) {
			take(n, n)
		} else {
			mapped = append(mapped, n)
		}
	}
	for _, n := range mapped {
		base := sanitizeName(n)
		wire := base
		for k := 2; ; k++ {
			if _, taken := w.fromWire[wire]; !taken {
				break
			}
			suffix := "_" + strconv.Itoa(k)
			wire = base[:min(len(base), maxWireName-len(suffix))] + suffix
		}
		take(n, wire)
	}
	return w
}

// sanitizeName is name with what the API refuses replaced (see above).
func sanitizeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			b.WriteString("__")
		case c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		s = "t_" + s
	}
	return s[:min(len(s), maxWireName)]
}

// WireToolName is the name a tool named name is offered under when no
// other tool of the request takes that name first: name itself if the
// API accepts it, else its sanitized form ("web.search" → "web__search").
func WireToolName(name string) string {
	if wireName.MatchString(name) {
		return name
	}
	return sanitizeName(name)
}

// wire is the name to send for name (sanitized if the request did not
// list it).
func (w *wireNames) wire(name string) string {
	if v, ok := w.toWire[name]; ok {
		return v
	}
	return WireToolName(name)
}

// local is the tool name of a wire name the model called; a name the
// request did not send (a model that calls a tool by its dotted name)
// is returned as it is.
func (w *wireNames) local(wire string) string {
	if v, ok := w.fromWire[wire]; ok {
		return v
	}
	return wire
}

// maxToolDescription is the API's limit on a function's description, in
// characters (OpenAI: "string too long. Expected a string with maximum
// length 1024"); a longer one is cut.
const maxToolDescription = 1024

// clipDescription cuts a tool description to maxToolDescription
// characters.
func clipDescription(s string) string {
	if utf8.RuneCountInString(s) <= maxToolDescription {
		return s
	}
	n := 0
	for i := range s {
		if n == maxToolDescription-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
