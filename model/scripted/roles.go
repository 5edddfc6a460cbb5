package scripted

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// subagent adds the steps of a sub-agent turn to st and returns the number
// of turns the sub-agent has (see Stream).
func (m *Model) subagent(st *stream, req model.Request) (turns int) {
	t := m.s.Tokens
	switch {
	case req.Guidance != "":
		st.add(revisionStep(t))
		return anyTurn
	case len(req.Injected) > 0:
		st.add(step{kind: kindText, lead: []string{"Noted " + strconv.Itoa(len(req.Injected)) + " updates. "}, n: max(1, t/8)})
		return anyTurn
	case m.s.Delegations != nil && m.s.Delegations.Depth > req.Depth:
		switch req.Turn {
		case 1:
			c := callList{req: &req, calls: make([]model.ToolCall, 0, 1)}
			c.add(model.ToolDelegate, delegateArgs{Task: "Deeper task of " + req.AgentID})
			st.add(step{kind: kindCalls, calls: c.calls})
		case 2:
			st.add(step{kind: kindText, n: max(1, t/4)})
		}
		return 2
	}
	if req.Turn == 1 {
		st.add(step{kind: kindText, n: max(1, t/4)})
	}
	return 1
}

// debater adds the steps of a debater's turn to st (see Stream).
func (m *Model) debater(st *stream, req model.Request) {
	agent := debateAgentIndex(req.AgentID)
	persona := req.Persona
	if persona == "" {
		persona = "debater"
		if agent >= 1 {
			persona = personas[(agent-1)%len(personas)]
		}
	}
	round := max(req.Round, 1)
	lead := []string{"[" + persona + "] round " + strconv.Itoa(round) + ": "}
	if len(req.Transcript) > 0 {
		lead = append(lead, "(answering "+strconv.Itoa(len(req.Transcript))+" earlier lines) ")
	}
	if d := m.s.Debate; d != nil && d.PanicRound == round && agent == max(d.Agents, 1) && req.Attempt <= 1 || round == 1 && m.memberPanics(req) {
		// The round's last speaker fails on the round's first run.
		st.add(step{kind: kindText, lead: lead, n: max(1, m.s.Tokens/4)})
		st.add(step{kind: kindPanic, panic: &Panic{NodeID: req.AgentID, Attempt: max(req.Attempt, 1)}})
		return
	}
	st.add(step{kind: kindText, lead: lead, n: max(3, m.s.Tokens/2)})
	st.add(step{kind: kindText, lead: []string{"\nSTANCE: " + string(DebateStance(agent, round))}})
}

// debateAgentIndex is the 1-based index N of a debater id "<node>:aN", or
// 0 when the id has no such suffix.
func debateAgentIndex(id string) int {
	id = id[strings.LastIndexByte(id, ':')+1:]
	if len(id) < 2 || id[0] != 'a' || id[1] < '0' || id[1] > '9' {
		return 0
	}
	n, err := strconv.Atoi(id[1:])
	if err != nil {
		return 0
	}
	return n
}

// DebateStance is the stance the scripted debater number agent (1-based)
// declares in round (1-based): held in round 1; from round 2 on, agents 2
// and 6 shifted, agent 3 conceded and the others held.
func DebateStance(agent, round int) messages.Stance {
	switch {
	case round < 2:
		return messages.StanceHeld
	case agent == 2 || agent == 6:
		return messages.StanceShifted
	case agent == 3:
		return messages.StanceConceded
	default:
		return messages.StanceHeld
	}
}

// judge adds the steps of a judge's turn to st (see Stream).
func (m *Model) judge(st *stream, req model.Request) {
	d := m.s.Debate
	consensus := d != nil && d.ConsensusRound > 0 && req.Round >= d.ConsensusRound
	st.add(step{kind: kindText, lead: []string{"Judging round " + strconv.Itoa(max(req.Round, 1)) + ": "}, n: 4})
	st.add(step{kind: kindText, lead: []string{"\nCONSENSUS_REACHED: " + strconv.FormatBool(consensus)}})
}

// Advisor answers, split into chunks.
var (
	adviceContinue  = []string{"<signal>CONTINUE</signal>"}
	adviceHalt      = []string{"<signal>HALT</signal> ", "The answer contradicts the plan."}
	adviceMalformed = []string{"Looks fine to me, I suppose."}
)

// advisor adds the answer of an advisor check to st (see Stream).
func (m *Model) advisor(st *stream, req model.Request) {
	if req.Consult != "" { // a worker's consult: advice, not a signal
		h := newHash(m.s.Seed).str("consult").str(req.AgentID).int(int64(req.Turn))
		topic := aspects[splitmix64(uint64(h))%uint64(len(aspects))]
		st.add(step{kind: kindText, lead: []string{"Advice for " + req.AgentID + ": ", "weigh " + topic + " first."}})
		return
	}
	a := m.s.Advisor
	answer := adviceContinue
	_, halt := m.halt[req.AgentID]
	_, malformed := m.malformed[req.AgentID]
	switch {
	case a != nil && req.Turn <= a.Redirects:
		h := newHash(m.s.Seed).str("advice").str(req.AgentID).int(int64(req.Turn))
		topic := aspects[splitmix64(uint64(h))%uint64(len(aspects))]
		answer = []string{"<signal>REDIRECT</signal> ", "Cover " + topic + " in more depth."}
	case halt:
		answer = adviceHalt
	case malformed:
		answer = adviceMalformed
	}
	st.add(step{kind: kindText, lead: answer})
}

// steerReasoning is what a steerer reasons before its diff.
var steerReasoning = []string{"Reading the steering note against the plan. ", "Writing the change as a graph diff. "}

// steerer adds the steps of a steerer's turn to st (see Stream).
func (m *Model) steerer(st *stream, req model.Request) {
	st.add(step{kind: kindReasoning, lead: steerReasoning})
	chunks, ok := m.steer[req.Note]
	if !ok {
		diff := messages.GraphDiff{Ops: []messages.DiffOp{{
			Op:   messages.OpAddNode,
			Node: &messages.PlanNode{ID: SteerNodeID(req.Note), Goal: req.Note},
		}}}
		js, err := json.Marshal(diff)
		if err != nil {
			panic(err) // unreachable: the diff only holds strings
		}
		chunks = splitChunks(string(js), MaxPlanChunk)
	}
	st.add(step{kind: kindText, lead: chunks})
}

// SteerNodeID is the id of the node the scripted steerer adds for a note
// that has no scripted diff: "s" and 8 hex digits of a hash of the note
// (whatever the seed).
func SteerNodeID(note string) string {
	const hex = "0123456789abcdef"
	h := uint32(splitmix64(uint64(newHash(0).str("steer").str(note))))
	b := []byte("s00000000")
	for i := 8; i >= 1; i-- {
		b[i] = hex[h&0xf]
		h >>= 4
	}
	return string(b)
}
