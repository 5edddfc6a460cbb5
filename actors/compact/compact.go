// Package compact shortens long texts deterministically: a team's synthesis
// before it is passed downstream, a debate's summaries, and the previews and
// positions recorded in events.
//
// Lengths are counted in runes (Unicode code points), never in bytes, so a
// cut never splits a multi-byte character.
package compact

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// DefaultLimit is the compaction limit, in runes, of a team's synthesis and
// of a debate's summaries.
const DefaultLimit = 2000

// Ellipsis marks a cut.
const Ellipsis = "…"

// Compact returns text unchanged and false when it has at most limit runes.
// Otherwise it keeps the start (about two thirds of what fits) and the end
// (about one third), both cut at word boundaries, joined by
// " … [compacted N characters] … " where N is the number of runes left out;
// the result has at most limit runes and Compact returns true.
//
// A limit <= 0 means DefaultLimit. A limit too small to hold the marker and
// some text on each side falls back to Truncate (the start, then "…").
// White space around the text is dropped first; a text that then fits is
// returned trimmed, without a marker (and true).
//
// Word boundaries are Unicode white space. A part is cut inside a word only
// when the word would otherwise take more than a quarter of that part (a
// long URL, a text without spaces). Invalid UTF-8 in a compacted text comes
// out as U+FFFD. The result depends on text and limit alone.
func Compact(text string, limit int) (string, bool) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	total := utf8.RuneCountInString(text)
	if total <= limit {
		return text, false
	}
	// The marker's length depends on N, and N <= total, so sizing the
	// marker for total's digit count keeps the result within limit.
	budget := limit - utf8.RuneCountInString(marker(total))
	if budget < 3 {
		return Truncate(text, limit)
	}
	headLen := budget * 2 / 3
	tailLen := budget - headLen

	// White space around the text is never worth keeping.
	core := []rune(text)
	for len(core) > 0 && unicode.IsSpace(core[0]) {
		core = core[1:]
	}
	for len(core) > 0 && unicode.IsSpace(core[len(core)-1]) {
		core = core[:len(core)-1]
	}
	if len(core) <= budget {
		// Only the surrounding white space made the text too long.
		return string(core), true
	}
	head := cutHead(core, headLen)
	tail := cutTail(core, tailLen)
	omitted := total - len(head) - len(tail)
	return string(head) + marker(omitted) + string(tail), true
}

// marker is the text put in place of n omitted runes.
func marker(n int) string {
	return " " + Ellipsis + " [compacted " + strconv.Itoa(n) + " characters] " + Ellipsis + " "
}

// cutHead returns at most n leading runes of rs, ending at a word boundary
// when one is close enough, without trailing white space. rs has more than
// n runes and does not start with white space, so the result is not empty.
func cutHead(rs []rune, n int) []rune {
	head := rs[:n]
	if !unicode.IsSpace(rs[n]) {
		// The cut falls inside a word: back off to the last space, unless
		// that loses more than a quarter of the head.
		for i := n - 1; i >= n-n/4 && i >= 0; i-- {
			if unicode.IsSpace(rs[i]) {
				head = rs[:i]
				break
			}
		}
	}
	end := len(head)
	for end > 0 && unicode.IsSpace(head[end-1]) {
		end--
	}
	return head[:end]
}

// cutTail returns at most n trailing runes of rs, starting at a word
// boundary when one is close enough, without leading white space. rs has
// more than n runes and does not end with white space, so the result is not
// empty.
func cutTail(rs []rune, n int) []rune {
	start := len(rs) - n
	if start > 0 && !unicode.IsSpace(rs[start-1]) {
		// The cut falls inside a word: skip ahead past the next space,
		// unless that loses more than a quarter of the tail.
		for i := start; i <= start+n/4 && i < len(rs); i++ {
			if unicode.IsSpace(rs[i]) {
				start = i + 1
				break
			}
		}
	}
	for start < len(rs) && unicode.IsSpace(rs[start]) {
		start++
	}
	return rs[start:]
}

// Truncate returns text unchanged and false when it has at most limit runes.
// Otherwise it keeps the first limit-1 runes, drops trailing white space,
// appends "…" and returns true: the result has at most limit runes. A limit
// below 1 gives "" (and true for a non-empty text). Truncate does not look
// for word boundaries; it cuts at a rune boundary and keeps the bytes of the
// kept part as they are.
func Truncate(text string, limit int) (string, bool) {
	if utf8.RuneCountInString(text) <= max(limit, 0) {
		return text, false
	}
	if limit < 1 {
		return "", true
	}
	// Byte offset of the rune at index limit-1.
	end, n := 0, 0
	for i := range text {
		if n == limit-1 {
			end = i
			break
		}
		n++
	}
	head := text[:end]
	for head != "" {
		r, size := utf8.DecodeLastRuneInString(head)
		if !unicode.IsSpace(r) {
			break
		}
		head = head[:len(head)-size]
	}
	return head + Ellipsis, true
}
