package compact_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/actors/compact"
)

// words returns "w1 w2 … wn".
func words(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%d", i+1)
	}
	return strings.Join(ws, " ")
}

func TestCompact(t *testing.T) {
	t.Parallel()
	greek := "alpha beta gamma delta epsilon zeta eta theta iota kappa" // 56 runes
	cjk := strings.TrimSpace(strings.Repeat("日本語 ", 50))                // 199 runes, 600+ bytes
	tests := []struct {
		name  string
		text  string
		limit int
		want  string
		cut   bool
	}{
		{"empty", "", 10, "", false},
		{"short", "hello world", 20, "hello world", false},
		{"exactly the limit", "hello", 5, "hello", false},
		{"multi-byte under the limit in runes, over in bytes", "日本語日本語", 6, "日本語日本語", false},
		{"default limit keeps 2000 runes", strings.Repeat("a", 2000), 0, strings.Repeat("a", 2000), false},
		{"negative limit is the default", strings.Repeat("a", 2000), -1, strings.Repeat("a", 2000), false},
		// marker for 56: 31 runes, budget 9 → head 6 (backs off to "alpha"), tail 3 (hard cut, no space near).
		{"word boundary head, hard tail", greek, 40, "alpha … [compacted 48 characters] … ppa", true},
		// budget 19 → head 12 "alpha beta g" backs off to "alpha beta", tail 7 "a kappa" → "kappa".
		{"word boundaries both sides", greek, 50, "alpha beta … [compacted 41 characters] … kappa", true},
		// marker for 199: 32 runes; budget 28 → head 18 "…日本" backs off to 15 runes,
		// tail 10 "本語 日本語 日本語" skips ahead to 7 runes.
		{"multi-byte runes", cjk, 60, "日本語 日本語 日本語 日本語 … [compacted 177 characters] … 日本語 日本語", true},
		{"no spaces: hard cuts", strings.Repeat("x", 100), 50, strings.Repeat("x", 12) + " … [compacted 82 characters] … " + strings.Repeat("x", 6), true},
		{"limit too small for the marker truncates", "abcdefghij", 5, "abcd…", true},
		{"limit 1", "abcdefghij", 1, "…", true},
		{"budget of 3 still compacts", strings.Repeat("y", 40), 34, "yy … [compacted 37 characters] … y", true},
		{"budget of 2 truncates", strings.Repeat("y", 40), 33, strings.Repeat("y", 32) + "…", true},
		{"surrounding white space is dropped", "  " + greek + "\n\n", 40, "alpha … [compacted 52 characters] … ppa", true},
		{"a text too long only by its white space is trimmed", strings.Repeat(" ", 50) + "short text" + strings.Repeat("\n", 50), 60, "short text", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cut := compact.Compact(tt.text, tt.limit)
			if got != tt.want || cut != tt.cut {
				t.Fatalf("Compact(%q, %d) = %q, %v; want %q, %v", tt.text, tt.limit, got, cut, tt.want, tt.cut)
			}
			limit := tt.limit
			if limit <= 0 {
				limit = compact.DefaultLimit
			}
			if n := utf8.RuneCountInString(got); n > limit {
				t.Fatalf("result has %d runes, more than %d", n, limit)
			}
		})
	}
}

// TestCompact_Properties checks, over many sizes, that the result fits the
// limit, keeps a prefix and a suffix of the text, counts the omitted runes
// exactly, and is deterministic.
func TestCompact_Properties(t *testing.T) {
	t.Parallel()
	texts := []string{words(700), strings.Repeat("é", 3000), strings.Repeat("ab cdé ", 400), strings.Repeat("🙂", 2500), strings.Repeat("ab   cd\n\n", 400)}
	for _, text := range texts {
		total := utf8.RuneCountInString(text)
		for _, limit := range []int{35, 36, 50, 101, 500, 1999, 2000, 2001} {
			got, cut := compact.Compact(text, limit)
			if again, _ := compact.Compact(text, limit); again != got {
				t.Fatalf("not deterministic for limit %d", limit)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("limit %d: invalid UTF-8", limit)
			}
			if total <= limit {
				if cut || got != text {
					t.Fatalf("limit %d: changed a text of %d runes", limit, total)
				}
				continue
			}
			if !cut {
				t.Fatalf("limit %d: not reported as compacted", limit)
			}
			if n := utf8.RuneCountInString(got); n > limit {
				t.Fatalf("limit %d: result has %d runes", limit, n)
			}
			head, rest, ok := strings.Cut(got, " … [compacted ")
			if !ok {
				// Only a limit too small for the marker truncates.
				if want, _ := compact.Truncate(text, limit); got != want || limit > 40 {
					t.Fatalf("limit %d: no marker in %q", limit, got)
				}
				continue
			}
			var omitted int
			var tail string
			if _, err := fmt.Sscanf(rest, "%d characters] … ", &omitted); err != nil {
				t.Fatalf("limit %d: marker %q: %v", limit, rest, err)
			}
			_, tail, _ = strings.Cut(rest, " characters] … ")
			if core := strings.TrimSpace(text); !strings.HasPrefix(core, head) || !strings.HasSuffix(core, tail) {
				t.Fatalf("limit %d: %q … %q is not a prefix and suffix of the text", limit, head, tail)
			}
			if kept := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail); kept+omitted != total {
				t.Fatalf("limit %d: kept %d + omitted %d != %d", limit, kept, omitted, total)
			}
			if head == "" || tail == "" {
				t.Fatalf("limit %d: empty part in %q", limit, got)
			}
		}
	}
}

func TestCompact_WordBoundaries(t *testing.T) {
	t.Parallel()
	text := words(500)
	got, _ := compact.Compact(text, 300)
	head, rest, _ := strings.Cut(got, " … [compacted ")
	_, tail, _ := strings.Cut(rest, " characters] … ")
	// Every kept word is whole: the parts end and start on word boundaries.
	if !strings.HasPrefix(text, head+" ") {
		t.Fatalf("head %q does not end at a word boundary", head)
	}
	if !strings.HasSuffix(text, " "+tail) {
		t.Fatalf("tail %q does not start at a word boundary", tail)
	}
	// About two thirds of the kept text is the head.
	if h, tl := len(head), len(tail); h < tl || h > 3*tl {
		t.Fatalf("head %d and tail %d runes are not about 2:1", h, tl)
	}
}

func TestCompact_InvalidUTF8(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("a\xffb ", 100)
	got, cut := compact.Compact(text, 100)
	if !cut || utf8.RuneCountInString(got) > 100 || !utf8.ValidString(got) {
		t.Fatalf("Compact of invalid UTF-8 = %q, %v", got, cut)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text  string
		limit int
		want  string
		cut   bool
	}{
		{"", 0, "", false},
		{"", 5, "", false},
		{"abc", 3, "abc", false},
		{"abcd", 3, "ab…", true},
		{"abcd", 1, "…", true},
		{"abcd", 0, "", true},
		{"abcd", -2, "", true},
		{"ab  cdef", 5, "ab…", true},
		{"日本語日本語", 4, "日本語…", true},
		{"日本語日本語", 6, "日本語日本語", false},
		{"🙂🙂🙂", 2, "🙂…", true},
	}
	for _, tt := range tests {
		got, cut := compact.Truncate(tt.text, tt.limit)
		if got != tt.want || cut != tt.cut {
			t.Errorf("Truncate(%q, %d) = %q, %v; want %q, %v", tt.text, tt.limit, got, cut, tt.want, tt.cut)
		}
	}
}
