package messages

import "strconv"

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
	return StreamID("debate:" + nodeID + "/r" + strconv.Itoa(round) + "/" + agentID)
}

// JudgeStream is the lane of a debate's judge for a round.
func JudgeStream(nodeID string, round int) StreamID {
	return StreamID("judge:" + nodeID + "/r" + strconv.Itoa(round))
}

// SteeringStream is the lane of one steering note.
func SteeringStream(steeringID string) StreamID { return StreamID("steering:" + steeringID) }
