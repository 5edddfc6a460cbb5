package debate_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/actors/debate"
	"github.com/conclave-ai/conclave/messages"
)

func TestParseJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       bool
	}{
		{"true", "Both sides agree.\nCONSENSUS_REACHED: true", true},
		{"false", "They disagree.\nCONSENSUS_REACHED: false", false},
		{"case-insensitive", "consensus_reached: TRUE", true},
		{"bold", "Assessment.\n**CONSENSUS_REACHED: true**", true},
		{"bold key only", "**CONSENSUS_REACHED:** true", true},
		{"backticks", "`CONSENSUS_REACHED: true`", true},
		{"code fence after", "```\nCONSENSUS_REACHED: true\n```", true},
		{"trailing blank lines and CRLF", "ok\r\nCONSENSUS_REACHED: true\r\n\r\n  \n", true},
		{"no space after colon", "CONSENSUS_REACHED:true", true},
		{"space before colon", "CONSENSUS_REACHED : true", true},
		{"not on the last line", "CONSENSUS_REACHED: true\nBut let me add a note.", false},
		{"missing", "The debate went well.", false},
		{"empty", "", false},
		{"white space only", "\n \n", false},
		{"other value", "CONSENSUS_REACHED: yes", false},
		{"trailing period", "CONSENSUS_REACHED: true.", false},
		{"other key", "CONSENSUS: true", false},
		{"key in a sentence", "I think CONSENSUS_REACHED: true", false},
	}
	for _, tt := range tests {
		if got := debate.ParseJudge(tt.text); got != tt.want {
			t.Errorf("%s: ParseJudge(%q) = %v, want %v", tt.name, tt.text, got, tt.want)
		}
	}
}

func TestParseStance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		stance     messages.Stance
		body       string
	}{
		{"held", "I keep my view.\nSTANCE: held", messages.StanceHeld, "I keep my view."},
		{"shifted", "Point taken.\n\nSTANCE: shifted\n", messages.StanceShifted, "Point taken."},
		{"conceded, any case, bold", "You win.  \n**stance: CONCEDED**", messages.StanceConceded, "You win."},
		{"backticks and trailing fence", "Fine.\n`STANCE: shifted`\n```", messages.StanceShifted, "Fine."},
		{"CRLF", "Ok.\r\nSTANCE: conceded\r\n", messages.StanceConceded, "Ok."},
		{"stance only", "STANCE: shifted", messages.StanceShifted, ""},
		{"missing", "My argument.\nMore argument.", messages.StanceHeld, "My argument.\nMore argument."},
		{"missing keeps trailing space", "My argument.  \n", messages.StanceHeld, "My argument.  \n"},
		{"unknown stance", "Hmm.\nSTANCE: undecided", messages.StanceHeld, "Hmm.\nSTANCE: undecided"},
		{"not on the last line", "STANCE: conceded\nActually no.", messages.StanceHeld, "STANCE: conceded\nActually no."},
		{"empty", "", messages.StanceHeld, ""},
	}
	for _, tt := range tests {
		stance, body := debate.ParseStance(tt.text)
		if stance != tt.stance || body != tt.body {
			t.Errorf("%s: ParseStance(%q) = %q, %q; want %q, %q", tt.name, tt.text, stance, body, tt.stance, tt.body)
		}
	}
}

// debateOf returns a transcript of rounds 1..n with agents a1 and a2.
func debateOf(n int) *debate.Transcript {
	var tr debate.Transcript
	for r := 1; r <= n; r++ {
		rs := string(rune('0' + r))
		tr.Add(r, "a1", "a1 says r"+rs)
		tr.Add(r, "a2", "a2 says r"+rs)
	}
	return &tr
}

func TestTranscript_Lines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		rounds       int
		compactAfter int
		want         []string
		compacted    []int
	}{
		{"empty", 0, 3, nil, nil},
		{"fewer rounds than compactAfter", 2, 3, []string{
			"Round 1, a1: a1 says r1", "Round 1, a2: a2 says r1",
			"Round 2, a1: a1 says r2", "Round 2, a2: a2 says r2",
		}, nil},
		{"exactly compactAfter", 3, 3, []string{
			"Round 1, a1: a1 says r1", "Round 1, a2: a2 says r1",
			"Round 2, a1: a1 says r2", "Round 2, a2: a2 says r2",
			"Round 3, a1: a1 says r3", "Round 3, a2: a2 says r3",
		}, nil},
		{"one older round", 4, 3, []string{
			"Round 1 summary: a1: a1 says r1; a2: a2 says r1",
			"Round 2, a1: a1 says r2", "Round 2, a2: a2 says r2",
			"Round 3, a1: a1 says r3", "Round 3, a2: a2 says r3",
			"Round 4, a1: a1 says r4", "Round 4, a2: a2 says r4",
		}, []int{1}},
		{"compactAfter 1", 3, 1, []string{
			"Round 1 summary: a1: a1 says r1; a2: a2 says r1",
			"Round 2 summary: a1: a1 says r2; a2: a2 says r2",
			"Round 3, a1: a1 says r3", "Round 3, a2: a2 says r3",
		}, []int{1, 2}},
		{"default compactAfter", 5, 0, []string{
			"Round 1 summary: a1: a1 says r1; a2: a2 says r1",
			"Round 2 summary: a1: a1 says r2; a2: a2 says r2",
			"Round 3, a1: a1 says r3", "Round 3, a2: a2 says r3",
			"Round 4, a1: a1 says r4", "Round 4, a2: a2 says r4",
			"Round 5, a1: a1 says r5", "Round 5, a2: a2 says r5",
		}, []int{1, 2}},
	}
	for _, tt := range tests {
		tr := debateOf(tt.rounds)
		if got := tr.Lines(tt.compactAfter); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Lines(%d) =\n%q\nwant\n%q", tt.name, tt.compactAfter, got, tt.want)
		}
		if got := tr.Compacted(tt.compactAfter); !reflect.DeepEqual(got, tt.compacted) {
			t.Errorf("%s: Compacted(%d) = %v, want %v", tt.name, tt.compactAfter, got, tt.compacted)
		}
	}
}

func TestTranscript_AddOrder(t *testing.T) {
	t.Parallel()
	var tr debate.Transcript
	tr.Add(2, "a2", "second round, a2")
	tr.Add(1, "a1", "first round, a1")
	tr.Add(2, "a1", "second round, a1")
	tr.Add(1, "a2", "first round, a2")
	if got := tr.Rounds(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("Rounds = %v", got)
	}
	want := []string{
		"Round 1, a1: first round, a1", "Round 1, a2: first round, a2",
		"Round 2, a2: second round, a2", "Round 2, a1: second round, a1",
	}
	if got := tr.Lines(3); !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines = %q", got)
	}
	turns := tr.Turns(2)
	turns[0].Text = "changed"
	if tr.Turns(2)[0].Text != "second round, a2" {
		t.Fatal("Turns shares the transcript")
	}
	if tr.Turns(9) != nil {
		t.Fatal("Turns of an unknown round")
	}
	if got := tr.Opening(); !reflect.DeepEqual(got, map[string]string{"a1": "first round, a1", "a2": "first round, a2"}) {
		t.Fatalf("Opening = %v", got)
	}
}

func TestTranscript_CompactRound(t *testing.T) {
	t.Parallel()
	var tr debate.Transcript
	tr.Add(1, "a1", "one two three four five six seven eight nine ten eleven twelve thirteen fourteen")
	tr.Add(1, "a2", "  Short\n\tand   spaced  ")
	tr.Add(1, "a3", "")
	tr.Add(1, "a4", "one two three four five six seven eight nine ten eleven twelve")
	want := "Round 1 summary: a1: one two three four five six seven eight nine ten eleven twelve…; " +
		"a2: Short and spaced; a3: (no text); a4: one two three four five six seven eight nine ten eleven twelve"
	if got := tr.CompactRound(1); got != want {
		t.Fatalf("CompactRound =\n%q\nwant\n%q", got, want)
	}
	if got := tr.CompactRound(1); got != want {
		t.Fatal("CompactRound is not deterministic")
	}
	if got := tr.CompactRound(2); got != "" {
		t.Fatalf("CompactRound(unknown) = %q", got)
	}
	// Huge words are bounded by the compaction limit.
	var big debate.Transcript
	for _, a := range []string{"a1", "a2", "a3", "a4"} {
		big.Add(1, a, strings.Repeat("x", 5000))
	}
	if got := big.CompactRound(1); utf8.RuneCountInString(got) > 2000 || !strings.HasPrefix(got, "Round 1 summary: a1: xxx") {
		t.Fatalf("CompactRound of huge words: %d runes", utf8.RuneCountInString(got))
	}
}

func TestFinalStances(t *testing.T) {
	t.Parallel()
	got := debate.FinalStances([]string{"c", "a", "b", "d"}, map[string]messages.Stance{
		"a": messages.StanceConceded, "b": messages.StanceShifted, "d": "bogus", "x": messages.StanceShifted,
	})
	want := []messages.AgentStance{
		{AgentID: "c", Stance: messages.StanceHeld},
		{AgentID: "a", Stance: messages.StanceConceded},
		{AgentID: "b", Stance: messages.StanceShifted},
		{AgentID: "d", Stance: messages.StanceHeld},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FinalStances = %+v", got)
	}
	if got := debate.FinalStances(nil, nil); len(got) != 0 {
		t.Fatalf("FinalStances(nil) = %+v", got)
	}
}

func TestDissents(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 250)
	stances := []messages.AgentStance{
		{AgentID: "a1", Stance: messages.StanceHeld},
		{AgentID: "a2", Stance: messages.StanceConceded},
		{AgentID: "a3", Stance: messages.StanceShifted},
		{AgentID: "a4", Stance: messages.StanceShifted},
	}
	opening := map[string]string{"a1": "held view", "a2": "  Rust is the answer.\n", "a3": long}
	got := debate.Dissents("n003", stances, opening)
	want := []messages.DissentPayload{
		{DissentID: "n003/dissent/a2", ConflictID: "n003", DissentingAgentID: "a2", Stance: messages.StanceConceded, Position: "Rust is the answer."},
		{DissentID: "n003/dissent/a3", ConflictID: "n003", DissentingAgentID: "a3", Stance: messages.StanceShifted, Position: strings.Repeat("é", 199) + "…"},
		{DissentID: "n003/dissent/a4", ConflictID: "n003", DissentingAgentID: "a4", Stance: messages.StanceShifted, Position: ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Dissents =\n%+v\nwant\n%+v", got, want)
	}
	if n := utf8.RuneCountInString(got[1].Position); n != debate.PositionRunes {
		t.Fatalf("position has %d runes", n)
	}
	if got := debate.Dissents("n", []messages.AgentStance{{AgentID: "a", Stance: messages.StanceHeld}}, nil); got != nil {
		t.Fatalf("Dissents with no dissent = %+v", got)
	}
}

// TestDebate_EndToEnd wires the pieces as a debate node would.
func TestDebate_EndToEnd(t *testing.T) {
	t.Parallel()
	var tr debate.Transcript
	declared := map[string]messages.Stance{}
	turns := map[int]map[string]string{
		1: {"pro": "Use Postgres: it is proven.\nSTANCE: held", "con": "Use SQLite: it is simpler.\nSTANCE: held"},
		2: {"pro": "Still Postgres.\nSTANCE: held", "con": "Fair, concurrency matters.\nSTANCE: conceded"},
	}
	for r := 1; r <= 2; r++ {
		for _, a := range []string{"pro", "con"} {
			stance, body := debate.ParseStance(turns[r][a])
			tr.Add(r, a, body)
			declared[a] = stance
		}
	}
	if !debate.ParseJudge("The con side conceded.\nCONSENSUS_REACHED: true") {
		t.Fatal("judge")
	}
	stances := debate.FinalStances([]string{"pro", "con"}, declared)
	ds := debate.Dissents("n1", stances, tr.Opening())
	if len(ds) != 1 || ds[0].DissentingAgentID != "con" || ds[0].Position != "Use SQLite: it is simpler." {
		t.Fatalf("dissents = %+v", ds)
	}
}
