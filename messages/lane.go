package messages

import (
	"strconv"
	"strings"
)

// StreamID names one lane of output inside a run: the run itself, the
// director, one council node, one sub-agent or the synthesiser. Together with
// the run id it is unique within a session.
type StreamID string

// Well-known stream ids. Node and sub-agent lanes are built with NodeStream
// and SubagentStream so their shape is defined in one place.
const (
	RunStream       StreamID = "run"
	DirectorStream  StreamID = "director"
	SynthesisStream StreamID = "synthesis"
	// SessionStream is the lane of session-level events (replay_truncated).
	SessionStream StreamID = "session"
)

// DirectorStreamOf is the director's lane for its n-th plan (1-based):
// "director" for the first, "director:<n>" for each re-plan.
func DirectorStreamOf(n int) StreamID {
	if n <= 1 {
		return DirectorStream
	}
	return StreamID("director:" + strconv.Itoa(n))
}

// NodeStream is the lane of council node nodeID.
func NodeStream(nodeID string) StreamID { return StreamID("node:" + nodeID) }

// SubagentStream is the lane of a sub-agent delegated from parent.
func SubagentStream(parent StreamID, subagentID string) StreamID {
	return StreamID(string(parent) + "/sub:" + subagentID)
}

// Lane places an event in the tree of streams of a run. Depth is 0 for the
// run lane, 1 for the director, council nodes and the synthesiser, and one
// more for each level of delegation below them.
type Lane struct {
	StreamID       StreamID `json:"stream_id"`
	Depth          int      `json:"depth"`
	ParentStreamID StreamID `json:"parent_stream_id,omitempty"`
}

// RunLane is the lane of run-level events.
func RunLane() Lane { return Lane{StreamID: RunStream} }

// Child returns the lane of a stream nested directly under l.
func (l Lane) Child(id StreamID) Lane {
	return Lane{StreamID: id, Depth: l.Depth + 1, ParentStreamID: l.StreamID}
}

// SynthesisStreamOf is the synthesis lane of a team or debate node (under
// the node's lane); the run's own synthesis lane is SynthesisStream.
func SynthesisStreamOf(nodeID string) StreamID { return StreamID("synthesis:" + nodeID) }

// DebateTurnStream is the lane of one debater's turn in a round.
func DebateTurnStream(nodeID string, round int, agentID string) StreamID {
	return DebateTurnStreamAt(nodeID, round, 1, agentID)
}

// DebateTurnStreamAt is the lane of a debater's turn in the attempt-th
// run of a round (debate_round_restarted): "debate:<node>/r<round>/<agent>"
// for the first, "debate:<node>/r<round>.<attempt>/<agent>" after.
func DebateTurnStreamAt(nodeID string, round, attempt int, agentID string) StreamID {
	return StreamID("debate:" + nodeID + "/" + roundPart(round, attempt) + "/" + agentID)
}

// JudgeStream is the lane of a debate's judge for a round.
func JudgeStream(nodeID string, round int) StreamID { return JudgeStreamAt(nodeID, round, 1) }

// JudgeStreamAt is the judge's lane in the attempt-th run of a round.
func JudgeStreamAt(nodeID string, round, attempt int) StreamID {
	return StreamID("judge:" + nodeID + "/" + roundPart(round, attempt))
}

func roundPart(round, attempt int) string {
	if attempt <= 1 {
		return "r" + strconv.Itoa(round)
	}
	return "r" + strconv.Itoa(round) + "." + strconv.Itoa(attempt)
}

// SteeringStream is the lane of one steering note.
func SteeringStream(steeringID string) StreamID { return StreamID("steering:" + steeringID) }

// LaneKind is what kind of lane a stream id names (ParseStreamID).
type LaneKind int

// Lane kinds.
const (
	LaneUnknown       LaneKind = iota
	LaneRun                    // "run"
	LaneSession                // "session"
	LaneDirector               // DirectorStreamOf: "director", "director:2", …
	LaneSynthesis              // "synthesis": the run's synthesiser
	LaneNode                   // NodeStream
	LaneSubagent               // SubagentStream
	LaneNodeSynthesis          // SynthesisStreamOf: a team's or a debate's synthesiser
	LaneDebateTurn             // DebateTurnStream
	LaneJudge                  // JudgeStream
	LaneSteering               // SteeringStream
)

// AgentRole is the role of the agent whose model turns a lane of kind k
// carries (the names of model.Role): "director", "worker", "subagent",
// "synthesizer", "debater", "judge" or "steerer"; "" for the run and
// session lanes and unknown ids, where no agent turns. An advisor's turns
// are reported on the lane it checks, with TokenUsagePayload.Role set.
func (k LaneKind) AgentRole() string {
	switch k {
	case LaneDirector:
		return "director"
	case LaneNode:
		return "worker"
	case LaneSubagent:
		return "subagent"
	case LaneSynthesis, LaneNodeSynthesis:
		return "synthesizer"
	case LaneDebateTurn:
		return "debater"
	case LaneJudge:
		return "judge"
	case LaneSteering:
		return "steerer"
	}
	return ""
}

// ParsedStream is a stream id taken apart: the inverse of the lane
// builders above.
type ParsedStream struct {
	Kind LaneKind
	// NodeID: the node of a node, node synthesis, debate turn or judge
	// lane.
	NodeID string
	// Round and AgentID: a debate turn's (Round alone: a judge's), and
	// Attempt which run of the round (1 for the first).
	Round   int
	Attempt int
	AgentID string
	// Parent and SubagentID: a sub-agent lane's delegating lane and id.
	Parent     StreamID
	SubagentID string
	// SteeringID: a steering note's lane.
	SteeringID string
	// Plan: which plan of the run a director lane is for (1-based).
	Plan int
}

// ParseStreamID takes a stream id apart; Kind is LaneUnknown for an id no
// builder above makes.
func ParseStreamID(id StreamID) ParsedStream {
	s := string(id)
	if i := strings.LastIndex(s, "/sub:"); i >= 0 {
		return ParsedStream{Kind: LaneSubagent, Parent: StreamID(s[:i]), SubagentID: s[i+len("/sub:"):]}
	}
	switch id {
	case RunStream:
		return ParsedStream{Kind: LaneRun}
	case SessionStream:
		return ParsedStream{Kind: LaneSession}
	case DirectorStream:
		return ParsedStream{Kind: LaneDirector, Plan: 1}
	case SynthesisStream:
		return ParsedStream{Kind: LaneSynthesis}
	}
	kind, rest, _ := strings.Cut(s, ":")
	if rest == "" {
		return ParsedStream{}
	}
	switch kind {
	case "director":
		n, err := strconv.Atoi(rest)
		if err != nil || n < 2 || StreamID(s) != DirectorStreamOf(n) {
			return ParsedStream{}
		}
		return ParsedStream{Kind: LaneDirector, Plan: n}
	case "node":
		return ParsedStream{Kind: LaneNode, NodeID: rest}
	case "synthesis":
		return ParsedStream{Kind: LaneNodeSynthesis, NodeID: rest}
	case "steering":
		return ParsedStream{Kind: LaneSteering, SteeringID: rest}
	case "debate": // node ids may hold '/' (a team's "T/X"): parse from the right
		j := strings.LastIndexByte(rest, '/')
		if j < 0 {
			return ParsedStream{}
		}
		node, round, attempt, ok := parseRound(rest[:j])
		if !ok || j == len(rest)-1 {
			return ParsedStream{}
		}
		return ParsedStream{Kind: LaneDebateTurn, NodeID: node, Round: round, Attempt: attempt, AgentID: rest[j+1:]}
	case "judge":
		node, round, attempt, ok := parseRound(rest)
		if !ok {
			return ParsedStream{}
		}
		return ParsedStream{Kind: LaneJudge, NodeID: node, Round: round, Attempt: attempt}
	}
	return ParsedStream{}
}

// parseRound splits "<node>/r<round>" or "<node>/r<round>.<attempt>"
// (attempt >= 2; 1 when absent).
func parseRound(s string) (node string, round, attempt int, ok bool) {
	i := strings.LastIndex(s, "/r")
	if i <= 0 {
		return "", 0, 0, false
	}
	num, att, hasAtt := strings.Cut(s[i+2:], ".")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return "", 0, 0, false
	}
	attempt = 1
	if hasAtt {
		a, err := strconv.Atoi(att)
		if err != nil || a < 2 || strconv.Itoa(a) != att {
			return "", 0, 0, false
		}
		attempt = a
	}
	return s[:i], n, attempt, true
}
