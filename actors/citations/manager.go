package citations

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// ErrInvalidHandoff wraps every error of FromHandoff.
var ErrInvalidHandoff = errors.New("citations: invalid hand-off")

// Manager numbers a run's citations. It is immutable: Add and Merge return
// a new Manager and never change the receiver, so Managers may be shared
// between goroutines freely. The zero value is an empty Manager.
//
// Lookups are linear in the number of citations, which suits the tens or
// hundreds of sources of a run.
type Manager struct {
	// cites is never appended to in place: a Manager that grows gets a new
	// array, so the arrays of older Managers are never written.
	cites []messages.Citation
}

// Add cites rawURL, normalised, seen by agentID at seenAt. A URL seen
// before keeps its number, title, first agent, first time and access path:
// Add then returns the receiver unchanged and the existing number. A new URL gets the next number (1-based, in
// first-seen order). title and accessedVia are trimmed of surrounding white
// space. The error is Normalize's.
func (m Manager) Add(rawURL, title, agentID, accessedVia string, seenAt time.Time) (Manager, int, error) {
	u, err := Normalize(rawURL)
	if err != nil {
		return m, 0, err
	}
	if n, ok := m.lookup(u); ok {
		return m, n, nil
	}
	c := messages.Citation{
		Number:      len(m.cites) + 1,
		URL:         u,
		Title:       strings.TrimSpace(title),
		FirstSeenBy: agentID,
		FirstSeenAt: seenAt.UTC(),
		AccessedVia: strings.TrimSpace(accessedVia),
	}
	return m.with(c), c.Number, nil
}

// with returns a Manager holding m's citations and then c.
func (m Manager) with(cs ...messages.Citation) Manager {
	// Full slice expression: append must copy, never write into an array
	// another Manager shares.
	return Manager{cites: append(m.cites[:len(m.cites):len(m.cites)], cs...)}
}

// lookup finds a normalised URL.
func (m Manager) lookup(normalized string) (int, bool) {
	for _, c := range m.cites {
		if c.URL == normalized {
			return c.Number, true
		}
	}
	return 0, false
}

// Number returns the number of rawURL, normalised, and whether it has been
// cited. A URL that does not normalise has not.
func (m Manager) Number(rawURL string) (int, bool) {
	u, err := Normalize(rawURL)
	if err != nil {
		return 0, false
	}
	return m.lookup(u)
}

// RenderInline returns the inline reference to rawURL, "[N]", or "" when it
// has not been cited.
func (m Manager) RenderInline(rawURL string) string {
	n, ok := m.Number(rawURL)
	if !ok {
		return ""
	}
	return "[" + strconv.Itoa(n) + "]"
}

// RenderSources returns the Markdown sources section:
//
//	## Sources
//
//	[1] Title - https://example.com/a
//	[2] https://example.com/b - https://example.com/b
//
// A citation without a title shows its URL in the title's place. An empty
// Manager renders as "".
func (m Manager) RenderSources() string {
	if len(m.cites) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Sources\n\n")
	for _, c := range m.cites {
		title := c.Title
		if title == "" {
			title = c.URL
		}
		fmt.Fprintf(&b, "[%d] %s - %s\n", c.Number, title, c.URL)
	}
	return b.String()
}

// List returns a copy of the citations, in number order.
func (m Manager) List() []messages.Citation { return slices.Clone(m.cites) }

// Len returns the number of citations.
func (m Manager) Len() int { return len(m.cites) }

// Merge returns a Manager holding m's citations, then other's that m does
// not hold, in other's order, numbered after m's. A URL both hold keeps m's
// number, title, first agent and first time (first_seen_by and
// first_seen_at always describe the same sighting).
func (m Manager) Merge(other Manager) Manager {
	var added []messages.Citation
	for _, c := range other.cites {
		if _, ok := m.lookup(c.URL); ok || slices.ContainsFunc(added, func(a messages.Citation) bool { return a.URL == c.URL }) {
			continue
		}
		c.Number = len(m.cites) + len(added) + 1
		added = append(added, c)
	}
	if len(added) == 0 {
		return m
	}
	return m.with(added...)
}

// ToHandoff returns the citations to pass through a delegation hand-off: a
// copy of List. FromHandoff on the other side rebuilds the Manager.
func (m Manager) ToHandoff() []messages.Citation { return m.List() }

// FromHandoff rebuilds a Manager from ToHandoff's citations. It checks that
// they are numbered 1..n in order, that every URL is already normalised and
// that no URL appears twice; any other list is an error wrapping
// ErrInvalidHandoff. The Manager keeps a copy of cs.
func FromHandoff(cs []messages.Citation) (Manager, error) {
	seen := make(map[string]int, len(cs))
	for i, c := range cs {
		if c.Number != i+1 {
			return Manager{}, fmt.Errorf("%w: citation %d is numbered %d", ErrInvalidHandoff, i+1, c.Number)
		}
		u, err := Normalize(c.URL)
		if err != nil {
			return Manager{}, fmt.Errorf("%w: citation %d: %w", ErrInvalidHandoff, c.Number, err)
		}
		if u != c.URL {
			return Manager{}, fmt.Errorf("%w: citation %d: url %q is not normalised (%q)", ErrInvalidHandoff, c.Number, c.URL, u)
		}
		if prev, ok := seen[u]; ok {
			return Manager{}, fmt.Errorf("%w: citations %d and %d have the same url %q", ErrInvalidHandoff, prev, c.Number, u)
		}
		seen[u] = c.Number
	}
	return Manager{cites: slices.Clone(cs)}, nil
}
