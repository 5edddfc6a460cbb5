package messages

import "testing"

// TestParseStreamID: every lane builder's id parses back to what built it,
// including team-qualified node ids ("T/x") and nested sub-agents.
func TestParseStreamID(t *testing.T) {
	t.Parallel()
	node := NodeStream("T/x")
	for _, tc := range []struct {
		id   StreamID
		want ParsedStream
	}{
		{RunStream, ParsedStream{Kind: LaneRun}},
		{SessionStream, ParsedStream{Kind: LaneSession}},
		{DirectorStream, ParsedStream{Kind: LaneDirector, Plan: 1}},
		{DirectorStreamOf(1), ParsedStream{Kind: LaneDirector, Plan: 1}},
		{DirectorStreamOf(3), ParsedStream{Kind: LaneDirector, Plan: 3}},
		{"director:1", ParsedStream{}},
		{"director:02", ParsedStream{}},
		{"director:x", ParsedStream{}},
		{SynthesisStream, ParsedStream{Kind: LaneSynthesis}},
		{node, ParsedStream{Kind: LaneNode, NodeID: "T/x"}},
		{SubagentStream(node, "s1"), ParsedStream{Kind: LaneSubagent, Parent: node, SubagentID: "s1"}},
		{SubagentStream(SubagentStream(node, "s1"), "s2"), ParsedStream{Kind: LaneSubagent, Parent: SubagentStream(node, "s1"), SubagentID: "s2"}},
		{SynthesisStreamOf("T/d"), ParsedStream{Kind: LaneNodeSynthesis, NodeID: "T/d"}},
		{DebateTurnStream("T/d", 3, "a2"), ParsedStream{Kind: LaneDebateTurn, NodeID: "T/d", Round: 3, Attempt: 1, AgentID: "a2"}},
		{DebateTurnStreamAt("T/d", 3, 2, "a2"), ParsedStream{Kind: LaneDebateTurn, NodeID: "T/d", Round: 3, Attempt: 2, AgentID: "a2"}},
		{JudgeStream("T/d", 12), ParsedStream{Kind: LaneJudge, NodeID: "T/d", Round: 12, Attempt: 1}},
		{JudgeStreamAt("T/d", 12, 4), ParsedStream{Kind: LaneJudge, NodeID: "T/d", Round: 12, Attempt: 4}},
		{"debate:d/r1.1/a1", ParsedStream{}},
		{"debate:d/r1.x/a1", ParsedStream{}},
		{SteeringStream("n-1"), ParsedStream{Kind: LaneSteering, SteeringID: "n-1"}},
		{"", ParsedStream{}},
		{"node:", ParsedStream{}},
		{"what:ever", ParsedStream{}},
		{"debate:d/rx/a1", ParsedStream{}},
		{"debate:d/r1/", ParsedStream{}},
		{"judge:d", ParsedStream{}},
	} {
		if got := ParseStreamID(tc.id); got != tc.want {
			t.Errorf("ParseStreamID(%q) = %+v, want %+v", tc.id, got, tc.want)
		}
	}
}

// TestLaneKind_AgentRole: the role whose turns each builder's lane
// carries; none on the run lane or an unknown id.
func TestLaneKind_AgentRole(t *testing.T) {
	t.Parallel()
	for id, want := range map[StreamID]string{
		RunStream:                              "",
		DirectorStream:                         "director",
		DirectorStreamOf(2):                    "director",
		NodeStream("T/n1"):                     "worker",
		SubagentStream(NodeStream("n1"), "s1"): "subagent",
		SynthesisStream:                        "synthesizer",
		SynthesisStreamOf("d1"):                "synthesizer",
		DebateTurnStream("d1", 2, "a1"):        "debater",
		JudgeStream("d1", 1):                   "judge",
		SteeringStream("st1"):                  "steerer",
		"nonsense":                             "",
	} {
		if got := ParseStreamID(id).Kind.AgentRole(); got != want {
			t.Errorf("%s: role %q, want %q", id, got, want)
		}
	}
}
