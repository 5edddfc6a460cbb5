package actors

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTurnOutput_Take(t *testing.T) {
	t.Parallel()
	o := newTurnOutput(4, 10)
	if got := o.take("abcdef"); got != "abcdef" || o.cut {
		t.Fatalf("take under the bound = %q (cut %v)", got, o.cut)
	}
	// 4 bytes left: "é" (2 bytes) fits after "gh", the next "é" does not.
	if got := o.take("ghéé"); got != "ghé" || !o.cut {
		t.Fatalf("take over the bound = %q (cut %v), want %q cut", got, o.cut, "ghé")
	}
	if got := o.take("more"); got != "" {
		t.Fatalf("take after the cut = %q", got)
	}
	unbounded := newTurnOutput(4, -1)
	if got := unbounded.take(strings.Repeat("x", 1<<20)); len(got) != 1<<20 || unbounded.cut {
		t.Fatalf("no bound: kept %d bytes (cut %v)", len(got), unbounded.cut)
	}
}

func TestTurnOutput_Pieces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		maxDelta int
		want     []string
	}{
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"abcd", 4, []string{"abcd"}},
		{"", 4, nil},
		{"aé€b", 4, []string{"aé", "€b"}},                 // é is 2 bytes, € 3: no rune is split
		{"€€", 2, []string{"€", "€"}},                     // a rune longer than maxDelta is a piece of its own
		{"ab\xff\xfecd", 3, []string{"ab\xff", "\xfecd"}}, // not UTF-8: cut by bytes
	} {
		var got []string
		o := newTurnOutput(tc.maxDelta, -1)
		if err := o.pieces(tc.in, func(s string) error { got = append(got, s); return nil }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("pieces(%q, %d) = %q, want %q", tc.in, tc.maxDelta, got, tc.want)
		}
		for _, p := range got {
			if utf8.ValidString(tc.in) && !utf8.ValidString(p) {
				t.Errorf("piece %q of %q is not valid UTF-8", p, tc.in)
			}
		}
	}
}
