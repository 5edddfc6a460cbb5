package tool

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DisplayName is how people see tool name: Def.DisplayName when the set
// (or the runtime) defines one, else one made from the name: "search" is
// "Search", "start_async_task" "Start async task", and an MCP server's
// "everything.echo" "everything: echo".
func (s *Set) DisplayName(name string) string {
	if e := s.entry(name); e != nil && e.def.DisplayName != "" {
		return e.def.DisplayName
	}
	if d, ok := builtins[name]; ok && d.DisplayName != "" {
		return d.DisplayName
	}
	return displayName(name)
}

func displayName(name string) string {
	if server, t, ok := strings.Cut(name, "."); ok && server != "" && t != "" {
		return server + ": " + t
	}
	s := strings.ReplaceAll(name, "_", " ")
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// maxSummary bounds an arguments summary, in runes.
const maxSummary = 120

// SummarizeArgs writes a call's arguments on one short line for people:
// an object's fields as "key=value" in key order (strings as they are,
// other values as compact JSON), any other JSON compact, cut at 120 runes
// with "…". Invalid JSON is summarised as the raw text, cut the same way.
func SummarizeArgs(args json.RawMessage) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		var b bytes.Buffer
		if json.Compact(&b, args) != nil {
			return cut(strings.Join(strings.Fields(string(args)), " "))
		}
		return cut(b.String())
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out strings.Builder
	for i, k := range keys {
		if i > 0 {
			out.WriteString(", ")
		}
		out.WriteString(k)
		out.WriteByte('=')
		var s string
		if json.Unmarshal(fields[k], &s) == nil {
			out.WriteString(strings.Join(strings.Fields(s), " "))
		} else {
			var b bytes.Buffer
			_ = json.Compact(&b, fields[k]) // valid: it came out of a valid object
			out.WriteString(b.String())
		}
		if out.Len() > 4*maxSummary {
			break // cut below; no need to write the rest
		}
	}
	return cut(out.String())
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxSummary {
		return s
	}
	r := []rune(s)
	return string(r[:maxSummary-1]) + "…"
}
