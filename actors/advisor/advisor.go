// Package advisor is the advisor gate (after arbiter's): before an agent's
// terminating turn is accepted, an advisor model reviews it and answers
// "<signal>CONTINUE</signal>", "<signal>REDIRECT</signal> guidance" or
// "<signal>HALT</signal> reason". Parse reads such an answer and Gate turns
// answers into decisions, keeping the agent's redirect budget.
//
// The gate fails closed: an answer that does not parse halts the agent,
// unless the run lets malformed answers through.
package advisor

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/conclave-ai/conclave/messages"
)

// Signal is an advisor's verdict on a terminating turn.
type Signal string

// Signals, as the advisor writes them (Parse accepts any case).
const (
	SignalContinue Signal = "CONTINUE"
	SignalRedirect Signal = "REDIRECT"
	SignalHalt     Signal = "HALT"
)

// Details the gate writes itself.
const (
	// DefaultHaltReason is a halt's detail when the advisor gives no reason.
	DefaultHaltReason = "advisor halted the agent"
	// MalformedDetail is the detail of a halt on an answer that does not
	// parse.
	MalformedDetail = "malformed advisor answer"
	// PreviewRunes is the length of Preview's text, before its "…".
	PreviewRunes = 120
)

const (
	openTag  = "<signal>"
	closeTag = "</signal>"
)

// Parse reads an advisor's answer. It takes the first "<signal>" tag and
// the first "</signal>" after it (tags in any case); the text between them,
// trimmed, must be CONTINUE, REDIRECT or HALT in any case. detail is the
// trimmed text after the closing tag, up to the next "<signal>" tag if
// there is one: the guidance of a REDIRECT, the reason of a HALT.
//
// The first signal wins: a later one is ignored, and a first one that is
// not a valid signal makes the answer malformed even when a later one is
// valid. ok is false for a malformed answer (no signal, no closing tag, an
// unknown signal); sig and detail are then empty.
func Parse(answer string) (sig Signal, detail string, ok bool) {
	start := indexFold(answer, openTag)
	if start < 0 {
		return "", "", false
	}
	rest := answer[start+len(openTag):]
	end := indexFold(rest, closeTag)
	if end < 0 {
		return "", "", false
	}
	switch word := strings.TrimSpace(rest[:end]); {
	case strings.EqualFold(word, string(SignalContinue)):
		sig = SignalContinue
	case strings.EqualFold(word, string(SignalRedirect)):
		sig = SignalRedirect
	case strings.EqualFold(word, string(SignalHalt)):
		sig = SignalHalt
	default:
		return "", "", false
	}
	detail = rest[end+len(closeTag):]
	if next := indexFold(detail, openTag); next >= 0 {
		detail = detail[:next]
	}
	return sig, strings.TrimSpace(detail), true
}

// indexFold is strings.Index with ASCII case folding; sub must be
// lowercase ASCII. (strings.ToLower could change byte offsets in s.)
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := 0; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// Gate decides on one agent's terminating turns and keeps its redirect
// budget. The zero value is a gate with the default budget that fails
// closed. A Gate belongs to one agent's actor; it is not safe for
// concurrent use.
type Gate struct {
	// MaxRedirects is the redirect budget; <= 0 means
	// messages.DefaultAdvisorRedirects. The redirect after the budget is a
	// gate_budget halt.
	MaxRedirects int
	// MalformedContinues lets an answer that does not parse through as
	// gate_continue (still marked Malformed) instead of halting.
	MalformedContinues bool

	redirects int // redirects granted so far
}

// NewGate returns a gate configured by a run's advisor options.
func NewGate(o messages.AdvisorOptions) *Gate {
	return &Gate{MaxRedirects: o.MaxRedirects, MalformedContinues: o.MalformedContinues}
}

// Budget is the redirect budget in force: MaxRedirects, or the default.
func (g *Gate) Budget() int {
	if g.MaxRedirects <= 0 {
		return messages.DefaultAdvisorRedirects
	}
	return g.MaxRedirects
}

// Redirects returns the number of redirects granted so far.
func (g *Gate) Redirects() int { return g.redirects }

// Decision is the gate's answer to one advisor answer.
type Decision struct {
	Kind messages.AdvisorKind
	// Detail is the redirect guidance, or why the agent halts.
	Detail string
	// Malformed: the advisor's answer did not parse.
	Malformed bool
	// Redirects is the number of redirects granted, this one included.
	Redirects int
}

// Halts reports whether the decision stops the agent (gate_halt or
// gate_budget).
func (d Decision) Halts() bool {
	return d.Kind == messages.AdvisorHalt || d.Kind == messages.AdvisorBudget
}

// Payload returns the advisor event recording d on the agent's lane;
// review is the terminating turn the advisor checked.
func (d Decision) Payload(review string) *messages.AdvisorPayload {
	return &messages.AdvisorPayload{
		Kind:      d.Kind,
		Detail:    d.Detail,
		Preview:   Preview(review),
		Malformed: d.Malformed,
		Redirects: d.Redirects,
	}
}

// Decide turns an advisor's answer into a decision:
//
//   - CONTINUE → gate_continue;
//   - REDIRECT → gate_redirect with the guidance while fewer than Budget
//     redirects were granted (counting this one), else gate_budget with
//     "redirect budget of N exhausted: <guidance>";
//   - HALT → gate_halt with the reason, or DefaultHaltReason;
//   - a malformed answer → gate_halt with MalformedDetail, or gate_continue
//     when MalformedContinues; Malformed is set either way.
func (g *Gate) Decide(answer string) Decision {
	sig, detail, ok := Parse(answer)
	d := Decision{Redirects: g.redirects}
	switch {
	case !ok && g.MalformedContinues:
		d.Kind, d.Malformed = messages.AdvisorContinue, true
	case !ok:
		d.Kind, d.Detail, d.Malformed = messages.AdvisorHalt, MalformedDetail, true
	case sig == SignalContinue:
		d.Kind = messages.AdvisorContinue
	case sig == SignalRedirect && g.redirects < g.Budget():
		g.redirects++
		d.Kind, d.Detail, d.Redirects = messages.AdvisorRedirect, detail, g.redirects
	case sig == SignalRedirect:
		d.Kind, d.Detail = messages.AdvisorBudget, fmt.Sprintf("redirect budget of %d exhausted", g.Budget())
		if detail != "" {
			d.Detail += ": " + detail
		}
	default: // SignalHalt
		d.Kind, d.Detail = messages.AdvisorHalt, detail
		if d.Detail == "" {
			d.Detail = DefaultHaltReason
		}
	}
	return d
}

// Preview returns the start of a terminating turn for the advisor event:
// the trimmed text, cut after PreviewRunes runes (not bytes) with "…"
// appended when it is longer.
func Preview(text string) string {
	text = strings.TrimSpace(text)
	n := 0
	for i := range text {
		if n == PreviewRunes {
			return strings.TrimRightFunc(text[:i], unicode.IsSpace) + "…"
		}
		n++
	}
	return text
}

// ErrConsultBudget is the result of a consult beyond an agent's budget.
var ErrConsultBudget = errors.New("advisor: consult budget spent")

// Consults keeps one agent's consult budget (the advisor's consult mode).
// The zero value has the default budget. A Consults belongs to one
// agent's actor; it is not safe for concurrent use.
type Consults struct {
	// Max is the budget; <= 0 means messages.DefaultAdvisorConsults.
	Max  int
	used int
}

// NewConsults returns the consult budget of a run's advisor options.
func NewConsults(o messages.AdvisorOptions) *Consults { return &Consults{Max: o.MaxConsults} }

// Budget is the consult budget in force: Max, or the default.
func (c *Consults) Budget() int {
	if c.Max <= 0 {
		return messages.DefaultAdvisorConsults
	}
	return c.Max
}

// Take spends one consult, or returns an error wrapping ErrConsultBudget
// (which says the budget) when none is left.
func (c *Consults) Take() error {
	if c.used >= c.Budget() {
		return fmt.Errorf("%w: this agent has used its %d consults of the advisor; go on without more advice", ErrConsultBudget, c.Budget())
	}
	c.used++
	return nil
}

// Used returns the number of consults taken.
func (c *Consults) Used() int { return c.used }

// Advice is the tool result of a consult from the advisor's answer: its
// text, trimmed, or a line saying it gave none.
func Advice(answer string) string {
	if s := strings.TrimSpace(answer); s != "" {
		return s
	}
	return "the advisor gave no advice"
}
