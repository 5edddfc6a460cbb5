package citations_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/citations"
	"github.com/conclave-ai/conclave/messages"
)

// t0 is when add's sources are seen: the n-th add of a test (from 1)
// sees its source at t0 plus n seconds (addAt gives the time).
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// add calls m.Add, seen at t0 plus m.Len()+1 seconds, and fails the test
// on error.
func add(t *testing.T, m citations.Manager, url, title, agent string) (citations.Manager, int) {
	t.Helper()
	m, n, err := m.Add(url, title, agent, "tool", t0.Add(time.Duration(m.Len()+1)*time.Second))
	if err != nil {
		t.Fatalf("Add(%q): %v", url, err)
	}
	return m, n
}

func TestManager_ZeroValue(t *testing.T) {
	t.Parallel()
	var m citations.Manager
	if m.Len() != 0 || m.RenderSources() != "" || m.RenderInline("https://example.com") != "" || len(m.List()) != 0 {
		t.Fatal("zero Manager is not empty")
	}
	if _, ok := m.Number("https://example.com"); ok {
		t.Fatal("zero Manager knows a URL")
	}
}

func TestManager_Add(t *testing.T) {
	t.Parallel()
	var m citations.Manager
	m, n1 := add(t, m, "https://Example.com/a/", "Page A", "n001")
	m, n2 := add(t, m, "https://example.com/b", "Page B", "n002")
	// The same page, another spelling, another agent, later: deduplicated,
	// first title, agent and time kept.
	m2, n3, err := m.Add("HTTPS://example.com:443/a#intro", "Other title", "n003", "memory", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n1 != 1 || n2 != 2 || n3 != 1 {
		t.Fatalf("numbers %d %d %d, want 1 2 1", n1, n2, n3)
	}
	want := []messages.Citation{
		{Number: 1, URL: "https://example.com/a", Title: "Page A", FirstSeenBy: "n001", FirstSeenAt: t0.Add(time.Second), AccessedVia: "tool"},
		{Number: 2, URL: "https://example.com/b", Title: "Page B", FirstSeenBy: "n002", FirstSeenAt: t0.Add(2 * time.Second), AccessedVia: "tool"},
	}
	if got := m2.List(); !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	if n, ok := m2.Number("https://example.com/b/"); !ok || n != 2 {
		t.Fatalf("Number = %d, %v", n, ok)
	}
	if _, ok := m2.Number("not a url"); ok {
		t.Fatal("Number of an invalid URL")
	}
	if got := m2.RenderInline("http://example.com/a"); got != "" {
		t.Fatalf("http and https are different sources, got %q", got)
	}
	if got := m2.RenderInline("https://example.com/a?"); got != "[1]" {
		t.Fatalf("RenderInline = %q", got)
	}
}

func TestManager_AddInvalid(t *testing.T) {
	t.Parallel()
	m, _ := add(t, citations.Manager{}, "https://example.com", "", "n001")
	m2, n, err := m.Add("ftp://example.com", "x", "n001", "", t0)
	if !errors.Is(err, citations.ErrInvalidURL) || n != 0 || m2.Len() != 1 {
		t.Fatalf("Add(ftp) = %d, %v, len %d", n, err, m2.Len())
	}
}

func TestManager_Immutable(t *testing.T) {
	t.Parallel()
	m0 := citations.Manager{}
	m1, _ := add(t, m0, "https://example.com/1", "one", "a")
	m2, _ := add(t, m1, "https://example.com/2", "two", "a")
	// Two Managers grown from the same one must not share what they add.
	m2b, _ := add(t, m1, "https://example.com/other", "other", "b")
	if m0.Len() != 0 || m1.Len() != 1 || m2.Len() != 2 || m2b.Len() != 2 {
		t.Fatalf("lengths %d %d %d %d", m0.Len(), m1.Len(), m2.Len(), m2b.Len())
	}
	if m2.List()[1].URL != "https://example.com/2" || m2b.List()[1].URL != "https://example.com/other" {
		t.Fatalf("siblings share citations: %+v %+v", m2.List(), m2b.List())
	}
	if _, ok := m1.Number("https://example.com/2"); ok {
		t.Fatal("old Manager sees a later citation")
	}
	// List returns a copy.
	l := m2.List()
	l[0].Title = "changed"
	if m2.List()[0].Title != "one" {
		t.Fatal("List shares the Manager's citations")
	}
	// Merge leaves both sides unchanged.
	_ = m1.Merge(m2b)
	if m1.Len() != 1 || m2b.Len() != 2 {
		t.Fatal("Merge changed its operands")
	}
}

func TestManager_RenderSources(t *testing.T) {
	t.Parallel()
	var m citations.Manager
	m, _ = add(t, m, "https://example.com/a", "Page A", "n001")
	m, _ = add(t, m, "https://example.com/b?y=2&x=1", "", "n002")
	m, _ = add(t, m, "http://[::1]:8080/c", "  Local  ", "n001")
	want := "## Sources\n\n" +
		"[1] Page A - https://example.com/a\n" +
		"[2] https://example.com/b?x=1&y=2 - https://example.com/b?x=1&y=2\n" +
		"[3] Local - http://[::1]:8080/c\n"
	if got := m.RenderSources(); got != want {
		t.Fatalf("RenderSources =\n%q\nwant\n%q", got, want)
	}
}

func TestManager_Merge(t *testing.T) {
	t.Parallel()
	var a, b citations.Manager
	a, _ = add(t, a, "https://example.com/1", "one", "a1")
	a, _ = add(t, a, "https://example.com/2", "two", "a1")
	b, _ = add(t, b, "https://example.com/3", "three", "b1")
	b, _ = add(t, b, "https://example.com/2/", "two again", "b1")
	b, _ = add(t, b, "https://example.com/4", "four", "b2")

	got := a.Merge(b).List()
	want := []messages.Citation{
		{Number: 1, URL: "https://example.com/1", Title: "one", FirstSeenBy: "a1", FirstSeenAt: t0.Add(1 * time.Second), AccessedVia: "tool"},
		{Number: 2, URL: "https://example.com/2", Title: "two", FirstSeenBy: "a1", FirstSeenAt: t0.Add(2 * time.Second), AccessedVia: "tool"},
		{Number: 3, URL: "https://example.com/3", Title: "three", FirstSeenBy: "b1", FirstSeenAt: t0.Add(1 * time.Second), AccessedVia: "tool"},
		{Number: 4, URL: "https://example.com/4", Title: "four", FirstSeenBy: "b2", FirstSeenAt: t0.Add(3 * time.Second), AccessedVia: "tool"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Merge = %+v\nwant %+v", got, want)
	}
	// The other way round, b's numbering wins.
	rev := b.Merge(a).List()
	if rev[0].URL != "https://example.com/3" || rev[1].Title != "two again" || rev[3].URL != "https://example.com/1" || rev[3].Number != 4 {
		t.Fatalf("b.Merge(a) = %+v", rev)
	}
	// Merging with an empty Manager, either way.
	if !reflect.DeepEqual(a.Merge(citations.Manager{}).List(), a.List()) || !reflect.DeepEqual(citations.Manager{}.Merge(a).List(), a.List()) {
		t.Fatal("merge with empty changed the citations")
	}
	if a.Merge(a).Len() != 2 {
		t.Fatal("self-merge added citations")
	}
}

func TestManager_Handoff(t *testing.T) {
	t.Parallel()
	var m citations.Manager
	m, _ = add(t, m, "https://example.com/1", "one", "a1")
	m, _ = add(t, m, "https://example.com/2?b=1&a=2", "", "a2")
	h := m.ToHandoff()
	back, err := citations.FromHandoff(h)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.List(), m.List()) || back.RenderSources() != m.RenderSources() {
		t.Fatalf("round trip: %+v, want %+v", back.List(), m.List())
	}
	// The rebuilt Manager does not share the hand-off slice.
	h[0].Title = "changed"
	if back.List()[0].Title != "one" || m.List()[0].Title != "one" {
		t.Fatal("hand-off slice is shared")
	}
	// It goes on numbering after the hand-off.
	back, n := add(t, back, "https://example.com/3", "", "a3")
	if n != 3 {
		t.Fatalf("next number %d, want 3", n)
	}
	if empty, err := citations.FromHandoff(nil); err != nil || empty.Len() != 0 {
		t.Fatalf("FromHandoff(nil) = %d, %v", empty.Len(), err)
	}
}

func TestFromHandoff_Invalid(t *testing.T) {
	t.Parallel()
	c := func(n int, url string) messages.Citation {
		return messages.Citation{Number: n, URL: url, FirstSeenBy: "a"}
	}
	tests := []struct {
		name string
		cs   []messages.Citation
	}{
		{"starts at 0", []messages.Citation{c(0, "https://a.example")}},
		{"starts at 2", []messages.Citation{c(2, "https://a.example")}},
		{"gap", []messages.Citation{c(1, "https://a.example"), c(3, "https://b.example")}},
		{"out of order", []messages.Citation{c(2, "https://b.example"), c(1, "https://a.example")}},
		{"repeated number", []messages.Citation{c(1, "https://a.example"), c(1, "https://b.example")}},
		{"not normalised", []messages.Citation{c(1, "https://A.example/")}},
		{"not a URL", []messages.Citation{c(1, "a.example")}},
		{"empty URL", []messages.Citation{c(1, "")}},
		{"duplicate URL", []messages.Citation{c(1, "https://a.example"), c(2, "https://a.example")}},
	}
	for _, tt := range tests {
		if _, err := citations.FromHandoff(tt.cs); !errors.Is(err, citations.ErrInvalidHandoff) {
			t.Errorf("%s: FromHandoff error %v, want ErrInvalidHandoff", tt.name, err)
		}
	}
}
