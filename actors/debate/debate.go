// Package debate holds the pure parts of a debate node (after gglib's
// council): reading a judge's verdict and a debater's stance from their
// text, the transcript the debaters see (old rounds compacted), the final
// stance map, and the dissents recorded when the debate is synthesised.
package debate

import (
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/conclave-ai/conclave/actors/compact"
	"github.com/conclave-ai/conclave/messages"
)

// Protocol keys of the last line of a judge's and a debater's text.
const (
	ConsensusKey = "CONSENSUS_REACHED"
	StanceKey    = "STANCE"
)

// Summary and position lengths.
const (
	// SummaryWords is how many words of each turn a round summary keeps.
	SummaryWords = 12
	// PositionRunes bounds a dissent's position, "…" included.
	PositionRunes = 200
)

// stripLine trims white space, '*' and '`' from both ends of a line, so
// that "**CONSENSUS_REACHED: true**" and "`STANCE: held`" read as plain.
func stripLine(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r == '*' || r == '`' || unicode.IsSpace(r) })
}

// lastLine returns the last line of text that is not empty once stripped,
// stripped, and the byte offset where that line starts; ok is false when
// there is none.
func lastLine(text string) (line string, start int, ok bool) {
	end := len(text)
	for end > 0 {
		start = strings.LastIndexByte(text[:end], '\n') + 1
		if line = stripLine(text[start:end]); line != "" {
			return line, start, true
		}
		end = max(start-1, 0)
	}
	return "", 0, false
}

// keyValue reads "KEY: value" (the key in any case, '*' and '`' allowed
// around key and value, as in "**KEY:** value") and returns value when the
// key is key.
func keyValue(line, key string) (string, bool) {
	k, v, ok := strings.Cut(line, ":")
	if !ok || !strings.EqualFold(stripLine(k), key) {
		return "", false
	}
	return stripLine(v), true
}

// ParseJudge reads a judge's verdict from the last line of its text that
// is not empty once '*', '`' and white space are stripped from its ends:
// "CONSENSUS_REACHED: true" (in any case) is true. Anything else, a
// missing verdict included, is false.
func ParseJudge(text string) bool {
	line, _, ok := lastLine(text)
	if !ok {
		return false
	}
	v, ok := keyValue(line, ConsensusKey)
	return ok && strings.EqualFold(v, "true")
}

// ParseStance reads a debater's stance from the last line of its text
// (found as ParseJudge finds it): "STANCE: held", "STANCE: shifted" or
// "STANCE: conceded", in any case. It returns the stance and the text
// without that line (and anything after it), trimmed on the right. A text
// without such a line is StanceHeld with the text unchanged.
func ParseStance(text string) (stance messages.Stance, body string) {
	line, start, ok := lastLine(text)
	if !ok {
		return messages.StanceHeld, text
	}
	v, ok := keyValue(line, StanceKey)
	if !ok {
		return messages.StanceHeld, text
	}
	s := messages.Stance(strings.ToLower(v))
	if !validStance(s) {
		return messages.StanceHeld, text
	}
	return s, strings.TrimRightFunc(text[:start], unicode.IsSpace)
}

// validStance reports whether s is one of the three stances.
func validStance(s messages.Stance) bool {
	return s == messages.StanceHeld || s == messages.StanceShifted || s == messages.StanceConceded
}

// Turn is one agent's text in one round.
type Turn struct {
	AgentID string
	Text    string
}

// Transcript collects a debate's turns by round. The zero value is empty.
// It belongs to the debate node's actor; it is not safe for concurrent use.
type Transcript struct {
	rounds []roundTurns // by increasing number
}

// roundTurns is one round's turns.
type roundTurns struct {
	n     int
	turns []Turn
}

// Add records agentID's turn in round (1-based), after the round's earlier
// turns. Rounds may be added in any order; they are kept by number.
func (t *Transcript) Add(round int, agentID, text string) {
	i, found := slices.BinarySearchFunc(t.rounds, round, func(r roundTurns, n int) int { return r.n - n })
	if !found {
		t.rounds = slices.Insert(t.rounds, i, roundTurns{n: round})
	}
	t.rounds[i].turns = append(t.rounds[i].turns, Turn{AgentID: agentID, Text: text})
}

// DropRound forgets round's turns (the round starts again).
func (t *Transcript) DropRound(round int) {
	t.rounds = slices.DeleteFunc(t.rounds, func(r roundTurns) bool { return r.n == round })
}

// Rounds returns the numbers of the rounds that have turns, in order.
func (t *Transcript) Rounds() []int {
	ns := make([]int, len(t.rounds))
	for i, r := range t.rounds {
		ns[i] = r.n
	}
	return ns
}

// Turns returns a copy of round's turns, in the order they were added.
func (t *Transcript) Turns(round int) []Turn {
	if r := t.find(round); r != nil {
		return slices.Clone(r.turns)
	}
	return nil
}

func (t *Transcript) find(n int) *roundTurns {
	for i := range t.rounds {
		if t.rounds[i].n == n {
			return &t.rounds[i]
		}
	}
	return nil
}

// Opening returns each agent's opening position: its first turn of round 1.
func (t *Transcript) Opening() map[string]string {
	open := make(map[string]string)
	if r := t.find(1); r != nil {
		for _, turn := range r.turns {
			if _, ok := open[turn.AgentID]; !ok {
				open[turn.AgentID] = turn.Text
			}
		}
	}
	return open
}

// effectiveCompactAfter is compactAfter, or the default when <= 0.
func effectiveCompactAfter(compactAfter int) int {
	if compactAfter <= 0 {
		return messages.DefaultDebateCompactAfter
	}
	return compactAfter
}

// Compacted returns the numbers of the rounds Lines(compactAfter) replaces
// by their summary: all but the last compactAfter rounds (compactAfter <= 0
// means messages.DefaultDebateCompactAfter).
func (t *Transcript) Compacted(compactAfter int) []int {
	old := len(t.rounds) - effectiveCompactAfter(compactAfter)
	if old <= 0 {
		return nil
	}
	return t.Rounds()[:old]
}

// Lines renders the transcript for the next turn's context
// (model.Request.Transcript): one line per turn, "Round N, agent: text",
// in round order, except that each round older than the last compactAfter
// rounds is a single line, its CompactRound summary. compactAfter <= 0
// means messages.DefaultDebateCompactAfter.
func (t *Transcript) Lines(compactAfter int) []string {
	old := len(t.rounds) - effectiveCompactAfter(compactAfter)
	var lines []string
	for i, r := range t.rounds {
		if i < old {
			lines = append(lines, t.CompactRound(r.n))
			continue
		}
		for _, turn := range r.turns {
			lines = append(lines, "Round "+strconv.Itoa(r.n)+", "+turn.AgentID+": "+turn.Text)
		}
	}
	return lines
}

// CompactRound returns the summary of a round, "Round N summary: a1: <the
// first SummaryWords words of a1's turn>…; a2: …", with "…" only after a
// turn that was cut and "(no text)" for an empty turn. It depends on the
// round's turns alone and is at most compact.DefaultLimit runes. A round
// without turns has no summary: "".
func (t *Transcript) CompactRound(round int) string {
	r := t.find(round)
	if r == nil || len(r.turns) == 0 {
		return ""
	}
	parts := make([]string, len(r.turns))
	for i, turn := range r.turns {
		words := strings.Fields(turn.Text)
		var s string
		switch {
		case len(words) == 0:
			s = "(no text)"
		case len(words) > SummaryWords:
			s = strings.Join(words[:SummaryWords], " ") + compact.Ellipsis
		default:
			s = strings.Join(words, " ")
		}
		parts[i] = turn.AgentID + ": " + s
	}
	summary, _ := compact.Compact("Round "+strconv.Itoa(round)+" summary: "+strings.Join(parts, "; "), compact.DefaultLimit)
	return summary
}

// FinalStances returns each agent's final stance, in agentIDs' order: its
// declared stance, or StanceHeld when it declared none (or something other
// than the three stances).
func FinalStances(agentIDs []string, declared map[string]messages.Stance) []messages.AgentStance {
	out := make([]messages.AgentStance, len(agentIDs))
	for i, id := range agentIDs {
		s := declared[id]
		if !validStance(s) {
			s = messages.StanceHeld
		}
		out[i] = messages.AgentStance{AgentID: id, Stance: s}
	}
	return out
}

// Dissents returns the dissent records of a debate node's synthesis: one
// per agent whose final stance is shifted or conceded, in stances' order,
// keeping its opening position (opening[agentID], the round 1 text),
// trimmed and cut to PositionRunes runes, "…" included.
func Dissents(nodeID string, stances []messages.AgentStance, opening map[string]string) []messages.DissentPayload {
	var out []messages.DissentPayload
	for _, s := range stances {
		if s.Stance != messages.StanceShifted && s.Stance != messages.StanceConceded {
			continue
		}
		pos, _ := compact.Truncate(strings.TrimSpace(opening[s.AgentID]), PositionRunes)
		out = append(out, messages.DissentPayload{
			DissentID:         nodeID + "/dissent/" + s.AgentID,
			ConflictID:        nodeID,
			DissentingAgentID: s.AgentID,
			Stance:            s.Stance,
			Position:          pos,
		})
	}
	return out
}
