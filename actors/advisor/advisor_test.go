package advisor_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/actors/advisor"
	"github.com/conclave-ai/conclave/messages"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, answer string
		sig          advisor.Signal
		detail       string
		ok           bool
	}{
		{"continue", "<signal>CONTINUE</signal>", advisor.SignalContinue, "", true},
		{"redirect with guidance", "<signal>REDIRECT</signal> Cite your sources.", advisor.SignalRedirect, "Cite your sources.", true},
		{"halt with reason", "<signal>HALT</signal>\nThe agent leaks credentials.\n", advisor.SignalHalt, "The agent leaks credentials.", true},
		{"upper-case tags, inner spaces, lower-case signal", "<SIGNAL> redirect </SIGNAL> shorter", advisor.SignalRedirect, "shorter", true},
		{"mixed case", "<Signal>\tHaLt\n</sIgNaL>", advisor.SignalHalt, "", true},
		{"text before the signal", "I reviewed the answer.\n<signal>CONTINUE</signal>", advisor.SignalContinue, "", true},
		{"multi-line detail", "<signal>REDIRECT</signal>\n  1. fix the dates\n  2. add a table  ", advisor.SignalRedirect, "1. fix the dates\n  2. add a table", true},
		{"two signals: first wins, detail ends at the second", "<signal>REDIRECT</signal> try again <signal>HALT</signal> stop", advisor.SignalRedirect, "try again", true},
		{"two signals, continue first", "<signal>CONTINUE</signal><signal>HALT</signal>", advisor.SignalContinue, "", true},
		{"invalid first signal is malformed", "<signal>MAYBE</signal> <signal>CONTINUE</signal>", "", "", false},
		{"empty", "", "", "", false},
		{"white space only", " \n\t", "", "", false},
		{"no tags", "CONTINUE", "", "", false},
		{"missing closing tag", "<signal>HALT because", "", "", false},
		{"closing tag only", "HALT</signal>", "", "", false},
		{"empty signal", "<signal></signal> x", "", "", false},
		{"unknown signal", "<signal>STOP</signal>", "", "", false},
		{"signal with extra words", "<signal>HALT NOW</signal>", "", "", false},
		{"misspelt tag", "<signl>HALT</signl>", "", "", false},
		{"multi-byte text around", "Résumé ✓ <signal>halt</signal> données privées", advisor.SignalHalt, "données privées", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sig, detail, ok := advisor.Parse(tt.answer)
			if sig != tt.sig || detail != tt.detail || ok != tt.ok {
				t.Fatalf("Parse(%q) = %q, %q, %v; want %q, %q, %v", tt.answer, sig, detail, ok, tt.sig, tt.detail, tt.ok)
			}
		})
	}
}

func TestGate_Decide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		gate advisor.Gate
		want advisor.Decision
		in   string
	}{
		{"continue", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorContinue}, "<signal>CONTINUE</signal>"},
		{"continue ignores trailing text", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorContinue, Detail: ""}, "<signal>CONTINUE</signal> looks fine"},
		{"redirect", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorRedirect, Detail: "add sources", Redirects: 1}, "<signal>REDIRECT</signal> add sources"},
		{"redirect without guidance", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorRedirect, Redirects: 1}, "<signal>REDIRECT</signal>"},
		{"halt", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorHalt, Detail: "off topic"}, "<signal>HALT</signal> off topic"},
		{"halt default reason", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorHalt, Detail: "advisor halted the agent"}, "<signal>HALT</signal>"},
		{"malformed halts", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorHalt, Detail: "malformed advisor answer", Malformed: true}, "I think it is fine."},
		{"malformed continues", advisor.Gate{MalformedContinues: true}, advisor.Decision{Kind: messages.AdvisorContinue, Malformed: true}, "<signal>HALT"},
		{"empty answer halts", advisor.Gate{}, advisor.Decision{Kind: messages.AdvisorHalt, Detail: "malformed advisor answer", Malformed: true}, ""},
		{"valid signal with MalformedContinues", advisor.Gate{MalformedContinues: true}, advisor.Decision{Kind: messages.AdvisorHalt, Detail: "no"}, "<signal>HALT</signal> no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := tt.gate
			got := g.Decide(tt.in)
			if got != tt.want {
				t.Fatalf("Decide(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if halts := tt.want.Kind == messages.AdvisorHalt; got.Halts() != halts {
				t.Fatalf("Halts() = %v", got.Halts())
			}
		})
	}
}

// TestGate_Budget runs sequences of answers through one gate.
func TestGate_Budget(t *testing.T) {
	t.Parallel()
	const (
		redirect = "<signal>REDIRECT</signal> again"
		cont     = "<signal>CONTINUE</signal>"
		bad      = "garbage"
	)
	type step struct {
		in        string
		kind      messages.AdvisorKind
		detail    string
		redirects int
	}
	tests := []struct {
		name  string
		gate  advisor.Gate
		steps []step
	}{
		{"default budget of 2", advisor.Gate{}, []step{
			{redirect, messages.AdvisorRedirect, "again", 1},
			{redirect, messages.AdvisorRedirect, "again", 2},
			{redirect, messages.AdvisorBudget, "redirect budget of 2 exhausted: again", 2},
			{redirect, messages.AdvisorBudget, "redirect budget of 2 exhausted: again", 2},
		}},
		{"continues do not spend the budget", advisor.Gate{MaxRedirects: 1}, []step{
			{cont, messages.AdvisorContinue, "", 0},
			{redirect, messages.AdvisorRedirect, "again", 1},
			{cont, messages.AdvisorContinue, "", 1},
			{"<signal>REDIRECT</signal>", messages.AdvisorBudget, "redirect budget of 1 exhausted", 1},
		}},
		{"malformed answers do not spend the budget", advisor.Gate{MaxRedirects: 1, MalformedContinues: true}, []step{
			{bad, messages.AdvisorContinue, "", 0},
			{redirect, messages.AdvisorRedirect, "again", 1},
			{bad, messages.AdvisorContinue, "", 1},
		}},
		{"negative budget is the default", advisor.Gate{MaxRedirects: -3}, []step{
			{redirect, messages.AdvisorRedirect, "again", 1},
			{redirect, messages.AdvisorRedirect, "again", 2},
			{redirect, messages.AdvisorBudget, "redirect budget of 2 exhausted: again", 2},
		}},
		{"budget of 3", advisor.Gate{MaxRedirects: 3}, []step{
			{redirect, messages.AdvisorRedirect, "again", 1},
			{redirect, messages.AdvisorRedirect, "again", 2},
			{redirect, messages.AdvisorRedirect, "again", 3},
			{redirect, messages.AdvisorBudget, "redirect budget of 3 exhausted: again", 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := tt.gate
			for i, s := range tt.steps {
				d := g.Decide(s.in)
				if d.Kind != s.kind || d.Detail != s.detail || d.Redirects != s.redirects {
					t.Fatalf("step %d: Decide(%q) = %+v, want %s %q %d", i, s.in, d, s.kind, s.detail, s.redirects)
				}
				if d.Halts() != (s.kind == messages.AdvisorBudget) {
					t.Fatalf("step %d: Halts() = %v", i, d.Halts())
				}
				if g.Redirects() != s.redirects {
					t.Fatalf("step %d: Redirects() = %d", i, g.Redirects())
				}
			}
		})
	}
}

func TestNewGate(t *testing.T) {
	t.Parallel()
	g := advisor.NewGate(messages.AdvisorOptions{MaxRedirects: 5, MalformedContinues: true})
	if g.Budget() != 5 || !g.MalformedContinues || g.Redirects() != 0 {
		t.Fatalf("NewGate = %+v", g)
	}
	if b := advisor.NewGate(messages.AdvisorOptions{}).Budget(); b != messages.DefaultAdvisorRedirects {
		t.Fatalf("default budget %d", b)
	}
}

func TestDecision_Payload(t *testing.T) {
	t.Parallel()
	d := advisor.Decision{Kind: messages.AdvisorBudget, Detail: "redirect budget of 2 exhausted", Redirects: 2}
	got := d.Payload("  final answer  ")
	want := messages.AdvisorPayload{Kind: messages.AdvisorBudget, Detail: "redirect budget of 2 exhausted", Preview: "final answer", Redirects: 2}
	if *got != want {
		t.Fatalf("Payload = %+v, want %+v", *got, want)
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	a120 := strings.Repeat("a", 120)
	e120 := strings.Repeat("é", 120) // 240 bytes
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"trimmed", "  \n hello \t", "hello"},
		{"exactly 120", a120, a120},
		{"121 is cut", a120 + "b", a120 + "…"},
		{"white space around does not count", "   " + a120 + "\n\n", a120},
		{"multi-byte: 120 runes kept whole", e120, e120},
		{"multi-byte cut by runes", e120 + "é", e120 + "…"},
		{"emoji", strings.Repeat("🙂", 130), strings.Repeat("🙂", 120) + "…"},
		{"no space before the ellipsis", strings.Repeat("a", 119) + " bcd", strings.Repeat("a", 119) + "…"},
	}
	for _, tt := range tests {
		got := advisor.Preview(tt.in)
		if got != tt.want {
			t.Errorf("%s: Preview = %q, want %q", tt.name, got, tt.want)
		}
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > advisor.PreviewRunes+1 {
			t.Errorf("%s: Preview = %q is too long or invalid", tt.name, got)
		}
	}
}

func TestConsults_Take(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ max, want int }{{0, messages.DefaultAdvisorConsults}, {1, 1}, {3, 3}} {
		c := advisor.NewConsults(messages.AdvisorOptions{MaxConsults: tc.max})
		for i := range tc.want {
			if err := c.Take(); err != nil {
				t.Fatalf("max %d: consult %d: %v", tc.max, i+1, err)
			}
		}
		err := c.Take()
		if !errors.Is(err, advisor.ErrConsultBudget) || !strings.Contains(err.Error(), "used its") || c.Used() != tc.want {
			t.Fatalf("max %d: consult %d: %v (used %d)", tc.max, tc.want+1, err, c.Used())
		}
	}
	if got := advisor.Advice("  "); got != "the advisor gave no advice" {
		t.Errorf("Advice of nothing: %q", got)
	}
	if got := advisor.Advice(" Cite sources. \n"); got != "Cite sources." {
		t.Errorf("Advice: %q", got)
	}
}
