package agui

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Projector turns the events of one Conclave run, in seq order, into AG-UI
// events. It does no I/O and reads no clock: every timestamp comes from an
// envelope or from the caller, so it can be driven from a table.
//
// A Conclave run may span several AG-UI runs (an interrupt ends the AG-UI
// run; the resume starts the next one), so the Projector keeps two kinds of
// state, both small:
//
//   - carried from one AG-UI run to the next: the open lanes (and which of
//     them are parked on interrupts), the open wave, the open interrupts,
//     the task graph and a message counter;
//   - of the current AG-UI run only: the text message and reasoning span
//     open on each lane.
//
// Use: Begin, then Apply for each event of the run, until Ended reports
// that a terminal event (RUN_FINISHED or RUN_ERROR) was produced, or end
// the AG-UI run early with Suspend (interrupt outcome) or Fail. After
// Suspend the Projector can Begin the next AG-UI run of the same Conclave
// run. A Projector is not safe for concurrent use.
type Projector struct {
	run    messages.RunID
	prefix string // of every id this projection makes: "<run id>/"

	// Carried across AG-UI runs.
	lanes   map[messages.StreamID]*lane
	order   []*lane  // open lanes, in the order they opened: parents first
	steps   []string // open steps (the current wave)
	pending []*pendingInterrupt
	graph   Graph
	msgSeq  uint64
	ended   bool // the Conclave run's terminal event was applied

	// Of the current AG-UI run.
	active bool
	thread string
	aguiID string
}

// lane is one Conclave lane as AG-UI sees it.
type lane struct {
	stream messages.StreamID
	parent *lane
	// subagent is the lane's subagentRunId; empty for lanes that speak as
	// the top-level agent (the run lane and the synthesiser).
	subagent    string
	name        string
	description string
	parentCall  string // parentToolCallId of a delegated sub-agent
	open        bool   // opened and not yet closed in Conclave
	children    int    // open child lanes
	parked      []string

	text      string // text message open in this AG-UI run
	reasoning string // reasoning span/message open in this AG-UI run
	lastText  string // the lane's latest text message: the parent of its tool calls
}

// pendingInterrupt is an interrupt raised and not yet resolved or expired.
type pendingInterrupt struct {
	p        *messages.InterruptRaisedPayload
	lane     *lane // the lane it was raised on (nil: the run lane)
	agentID  string
	raisedAt time.Time
}

// NewProjector returns the projector of one Conclave run.
func NewProjector(run messages.RunID) *Projector {
	return &Projector{run: run, prefix: string(run) + "/", lanes: map[messages.StreamID]*lane{}, graph: newGraph(run)}
}

// RunID is the Conclave run projected.
func (p *Projector) RunID() messages.RunID { return p.run }

// Ended reports whether the Conclave run's terminal event was projected.
func (p *Projector) Ended() bool { return p.ended }

// Active reports whether an AG-UI run is open (Begin was called and the
// run has not finished, failed or been suspended).
func (p *Projector) Active() bool { return p.active }

// Graph returns a copy of the task graph.
func (p *Projector) Graph() Graph { return p.graph.clone() }

// SubagentRunID is the subagentRunId of a Conclave lane.
func (p *Projector) SubagentRunID(stream messages.StreamID) string { return p.prefix + string(stream) }

// ToolCallID is the AG-UI toolCallId of a tool call of a lane.
func (p *Projector) ToolCallID(stream messages.StreamID, callID string) string {
	return p.prefix + string(stream) + "#" + callID
}

func (p *Projector) nextMessageID() string {
	p.msgSeq++
	return p.prefix + "m" + strconv.FormatUint(p.msgSeq, 10)
}

// BeginOptions describe the AG-UI run being opened.
type BeginOptions struct {
	ThreadID    string
	RunID       string // the client's runId
	ParentRunID string // the interrupted AG-UI run this one resumes
	Metadata    Metadata
	Time        time.Time
}

// Begin opens an AG-UI run: RUN_STARTED, a STATE_SNAPSHOT of the task
// graph, then the wave and the lanes that are open in Conclave (a resumed
// run reopens what the interrupted one closed as suspended; the lanes keep
// their subagentRunId, since they are the same invocations).
func (p *Projector) Begin(dst []Event, o BeginOptions) []Event {
	p.active, p.thread, p.aguiID = true, o.ThreadID, o.RunID
	ts := o.Time
	dst = append(dst, &RunStarted{Base: base(TypeRunStarted, ts), ThreadID: o.ThreadID, RunID: o.RunID,
		ProtocolVersion: ProtocolVersion, ParentRunID: o.ParentRunID, Metadata: o.Metadata})
	dst = append(dst, p.snapshot(ts))
	for _, s := range p.steps {
		dst = append(dst, &StepStarted{Base: base(TypeStepStarted, ts), StepName: s})
	}
	for _, l := range p.order {
		if l.subagent != "" {
			dst = append(dst, l.started(ts))
		}
	}
	return dst
}

func (p *Projector) snapshot(ts time.Time) *StateSnapshot {
	b, err := json.Marshal(&p.graph)
	if err != nil { // cannot happen: the graph is strings, ints and maps of them
		b = []byte("{}")
	}
	return &StateSnapshot{Base: base(TypeStateSnapshot, ts), Snapshot: json.RawMessage(b)}
}

func (p *Projector) delta(ts time.Time, ops ...PatchOp) *StateDelta {
	return &StateDelta{Base: base(TypeStateDelta, ts), Delta: ops}
}

func (l *lane) started(ts time.Time) *SubagentStarted {
	e := &SubagentStarted{Base: base(TypeSubagentStarted, ts), SubagentRunID: l.subagent, Name: l.name,
		Description: l.description, ParentToolCallID: l.parentCall}
	if l.parent != nil {
		e.ParentSubagentRunID = l.parent.subagent
	}
	return e
}

func custom(ts time.Time, l *lane, typ messages.EventType, v any) *Custom {
	c := &Custom{Base: base(TypeCustom, ts), Name: "conclave." + string(typ), Value: v}
	if l != nil {
		c.SubagentRunID = l.subagent
	}
	return c
}

// Apply projects one event of the run. Events of other runs and events
// after the run's terminal event are ignored. Apply must be called between
// Begin and the end of the AG-UI run.
func (p *Projector) Apply(dst []Event, env *messages.Envelope) []Event {
	if env.RunID != p.run || p.ended || !p.active {
		return dst
	}
	ts := env.Timestamp
	switch pl := env.Payload.(type) {
	case *messages.RunStartedPayload:
		// What the run was asked, not how the runtime keeps it (tenant, …).
		dst = append(dst, custom(ts, nil, env.Type, runStartedValue{Question: pl.Question, HITL: pl.HITL, Scenario: pl.Scenario}))

	case *messages.PlanningStartedPayload:
		l := p.openLane(env, "director", "Plans the council: "+pl.Question, "")
		dst = append(dst, l.started(ts))
	case *messages.PlanProposedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, "")
		p.graph.setPlan(pl.Plan, pl.Waves)
		dst = append(dst, p.snapshot(ts))
	case *messages.PlanningFailedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneError("planning_failed"), pl.Error)
	case *messages.PlanApprovedPayload:
		if pl.Edited && pl.Plan != nil {
			p.graph.setPlan(*pl.Plan, pl.Waves)
			p.graph.Status = messages.StatusRunning
			dst = append(dst, p.snapshot(ts))
		} else {
			dst = append(dst, p.delta(ts, p.graph.setStatus(messages.StatusRunning)))
		}
		dst = append(dst, custom(ts, nil, env.Type, pl))
	case *messages.PlanRejectedPayload:
		dst = append(dst, custom(ts, nil, env.Type, pl))
	case *messages.RunRewoundPayload:
		// A rewound run starts from its source's plan with the earlier
		// waves' nodes done: one snapshot, then the rewind itself.
		p.graph.setPlan(pl.Plan, pl.Waves)
		p.graph.Status = messages.StatusRunning
		for _, n := range pl.Reused {
			p.graph.setNodeStatus(n.NodeID, "completed")
		}
		dst = append(dst, p.snapshot(ts), custom(ts, nil, env.Type, pl))

	case *messages.WaveStartedPayload:
		if pl.Team != "" { // a team's nested wave: not a step of the run
			dst = append(dst, custom(ts, p.lanes[env.Lane.StreamID], env.Type, pl))
			break
		}
		name := waveStep(pl.Wave)
		if !slices.Contains(p.steps, name) {
			p.steps = append(p.steps, name)
			dst = append(dst, &StepStarted{Base: base(TypeStepStarted, ts), StepName: name})
		}
		dst = append(dst, p.delta(ts, p.graph.setWave(pl.Wave)))
	case *messages.WaveCompletedPayload:
		if pl.Team != "" {
			dst = append(dst, custom(ts, p.lanes[env.Lane.StreamID], env.Type, pl))
			break
		}
		name := waveStep(pl.Wave)
		if i := slices.Index(p.steps, name); i >= 0 {
			p.steps = slices.Delete(p.steps, i, i+1)
			dst = append(dst, &StepFinished{Base: base(TypeStepFinished, ts), StepName: name})
		}

	case *messages.NodeStartedPayload:
		l := p.openLane(env, pl.NodeID, pl.Goal, "")
		dst = append(dst, l.started(ts))
		dst = p.nodeStatus(dst, ts, pl.NodeID, NodeRunning)
	case *messages.NodeCompletedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, pl.Output)
		dst = p.nodeStatus(dst, ts, pl.NodeID, NodeCompleted)
	case *messages.NodeFailedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneError("node_failed"), pl.Error)
		dst = p.nodeStatus(dst, ts, pl.NodeID, NodeFailed)
	case *messages.NodeCancelledPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneError("cancelled"), pl.Reason)
		dst = p.nodeStatus(dst, ts, pl.NodeID, NodeCancelled)
	case *messages.NodeSkippedPayload:
		dst = p.nodeStatus(dst, ts, pl.NodeID, NodeSkipped)
		dst = append(dst, custom(ts, nil, env.Type, pl))

	case *messages.SubagentStartedPayload:
		parentCall := ""
		if pl.CallID != "" {
			parentCall = p.ToolCallID(env.Lane.ParentStreamID, pl.CallID)
		}
		l := p.openLane(env, pl.SubagentID, pl.Task, parentCall)
		dst = append(dst, l.started(ts))
	case *messages.SubagentFinishedPayload:
		switch pl.Outcome {
		case messages.OutcomeOK:
			dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, pl.Output)
		default: // failed, cancelled
			msg := pl.Error
			if msg == "" {
				msg = "sub-agent " + string(pl.Outcome)
			}
			dst = p.closeLane(dst, ts, env.Lane.StreamID, laneError(string(pl.Outcome)), msg)
		}

	case *messages.SynthesisStartedPayload:
		if env.Lane.StreamID != messages.SynthesisStream { // a team's or a debate's synthesis
			l := p.openLane(env, string(env.Lane.StreamID), "", "")
			dst = append(dst, l.started(ts))
			break
		}
		p.openLane(env, "synthesizer", "", "")
		dst = append(dst, p.delta(ts, p.graph.setStatus(messages.StatusSynthesizing)))
	case *messages.SynthesisCompletedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, "")
	case *messages.SynthesisFailedPayload:
		dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, "")
		dst = append(dst, custom(ts, nil, env.Type, pl))

	case *messages.TextDeltaPayload:
		l := p.laneOf(env)
		dst = l.closeReasoning(dst, ts)
		if l.text == "" {
			l.text = p.nextMessageID()
			l.lastText = l.text
			start := &TextMessageStart{Base: base(TypeTextMessageStart, ts), SubagentRunID: l.subagent, MessageID: l.text, Role: "assistant"}
			if l.subagent != "" {
				start.Name = l.name
			}
			dst = append(dst, start)
		}
		dst = append(dst, &TextMessageContent{Base: base(TypeTextMessageContent, ts), SubagentRunID: l.subagent, MessageID: l.text, Delta: pl.Delta})
	case *messages.ReasoningDeltaPayload:
		l := p.laneOf(env)
		dst = l.closeText(dst, ts)
		if l.reasoning == "" {
			l.reasoning = p.nextMessageID()
			dst = append(dst,
				&ReasoningStart{Base: base(TypeReasoningStart, ts), SubagentRunID: l.subagent, MessageID: l.reasoning},
				&ReasoningMessageStart{Base: base(TypeReasoningMessageStart, ts), SubagentRunID: l.subagent, MessageID: l.reasoning, Role: "reasoning"})
		}
		dst = append(dst, &ReasoningMessageContent{Base: base(TypeReasoningMessageContent, ts), SubagentRunID: l.subagent, MessageID: l.reasoning, Delta: pl.Delta})
	case *messages.ToolCallStartedPayload:
		l := p.laneOf(env)
		dst = l.closeMessages(dst, ts)
		id := p.ToolCallID(env.Lane.StreamID, pl.CallID)
		args := string(pl.Args)
		if len(pl.Args) == 0 {
			args = "{}"
		}
		dst = append(dst,
			&ToolCallStart{Base: base(TypeToolCallStart, ts), SubagentRunID: l.subagent, ToolCallID: id, ToolCallName: pl.Tool, ParentMessageID: l.lastText},
			&ToolCallArgs{Base: base(TypeToolCallArgs, ts), SubagentRunID: l.subagent, ToolCallID: id, Delta: args},
			&ToolCallEnd{Base: base(TypeToolCallEnd, ts), SubagentRunID: l.subagent, ToolCallID: id})
	case *messages.ToolCallFinishedPayload:
		l := p.laneOf(env)
		id := p.ToolCallID(env.Lane.StreamID, pl.CallID)
		r := &ToolCallResult{Base: base(TypeToolCallResult, ts), SubagentRunID: l.subagent, MessageID: id + "/result",
			ToolCallID: id, Content: pl.Result, Role: "tool"}
		if pl.IsError {
			r.Metadata = Metadata{"conclave": map[string]any{"isError": true}}
		}
		dst = append(dst, r)
	case *messages.ToolCallProgressPayload:
		// AG-UI has no tool progress event: CUSTOM, naming the call by its
		// AG-UI toolCallId as well.
		dst = append(dst, custom(ts, p.laneOf(env), env.Type, toolProgressValue{pl, p.ToolCallID(env.Lane.StreamID, pl.CallID)}))
	case *messages.TokenUsagePayload:
		dst = append(dst, custom(ts, p.laneOf(env), env.Type, pl))
	case *messages.AgentRestartedPayload:
		l := p.laneOf(env)
		dst = l.closeMessages(dst, ts) // the failed attempt's partial output is discarded
		dst = append(dst, custom(ts, l, env.Type, pl))
	case *messages.WarningPayload:
		dst = append(dst, custom(ts, p.laneOf(env), env.Type, pl))

	case *messages.InterruptRaisedPayload:
		l := p.lanes[env.Lane.StreamID]
		p.pending = append(p.pending, &pendingInterrupt{p: pl, lane: l, agentID: env.AgentID, raisedAt: ts})
		if l != nil {
			l.parked = append(l.parked, pl.InterruptID)
		}
		if pl.Kind == messages.InterruptNodeApproval {
			dst = p.nodeStatus(dst, ts, pl.NodeID, NodeAwaitingApproval)
		}
		dst = append(dst, custom(ts, l, env.Type, pl))
	case *messages.InterruptResolvedPayload:
		l := p.endInterrupt(pl.InterruptID)
		dst = append(dst, custom(ts, l, env.Type, pl))
	case *messages.InterruptExpiredPayload:
		l := p.endInterrupt(pl.InterruptID)
		dst = append(dst, custom(ts, l, env.Type, pl))

	case *messages.RunFinishedPayload:
		dst = p.closeAll(dst, ts, false)
		dst = append(dst, p.delta(ts, p.graph.setStatus(messages.StatusFinished)))
		result, _ := json.Marshal(struct {
			Answer     string              `json:"answer"`
			Nodes      messages.NodeCounts `json:"nodes"`
			DurationMS int64               `json:"durationMs"`
		}{pl.Answer, pl.Nodes, pl.DurationMS})
		dst = append(dst, &RunFinished{Base: base(TypeRunFinished, ts), ThreadID: p.thread, RunID: p.aguiID,
			Result: result, Outcome: &RunOutcome{Type: OutcomeSuccess}, Usage: usage(pl.Usage)})
		p.ended, p.active = true, false
	case *messages.RunErrorPayload:
		dst = p.closeAll(dst, ts, false)
		dst = append(dst, p.delta(ts, p.graph.setStatus(statusOf(pl.Code))))
		msg := pl.Message
		if msg == "" {
			msg = string(pl.Code)
		}
		dst = append(dst, &RunError{Base: base(TypeRunError, ts), Message: msg, Code: string(pl.Code), Usage: usage(pl.Usage)})
		p.ended, p.active = true, false

	default:
		// Every other event (teams, debates, steering, advisor, citations)
		// is a CUSTOM event; one that opens or closes a lane (a debate
		// turn, a judge, a steering note) also opens or closes it as a
		// sub-agent lane, so that its streamed text is attributed.
		switch env.Type.Role() {
		case messages.RoleOpens:
			l := p.openLane(env, string(env.Lane.StreamID), "", "")
			dst = append(dst, l.started(ts), custom(ts, l, env.Type, env.Payload))
		case messages.RoleCloses:
			dst = append(dst, custom(ts, p.lanes[env.Lane.StreamID], env.Type, env.Payload))
			dst = p.closeLane(dst, ts, env.Lane.StreamID, laneOK, "")
		default:
			dst = append(dst, custom(ts, p.lanes[env.Lane.StreamID], env.Type, env.Payload))
		}
	}
	return dst
}

// toolProgressValue is the value of CUSTOM conclave.tool_call_progress:
// the payload, and the toolCallId of the TOOL_CALL_START it is about.
type toolProgressValue struct {
	*messages.ToolCallProgressPayload
	ToolCallID string `json:"toolCallId"`
}

// runStartedValue is the value of CUSTOM conclave.run_started.
type runStartedValue struct {
	Question string             `json:"question"`
	HITL     messages.HITLMode  `json:"hitl"`
	Scenario *messages.Scenario `json:"scenario,omitempty"`
}

func usage(u messages.Usage) []TokenUsage {
	return []TokenUsage{{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}}
}

func statusOf(code messages.ErrorCode) messages.RunStatus {
	switch code {
	case messages.ErrCodeAborted:
		return messages.StatusAborted
	case messages.ErrCodeInterrupted:
		return messages.StatusInterrupted
	default:
		return messages.StatusFailed
	}
}

func (p *Projector) nodeStatus(dst []Event, ts time.Time, id, status string) []Event {
	if op, ok := p.graph.setNodeStatus(id, status); ok {
		dst = append(dst, p.delta(ts, op))
	}
	return dst
}

// openLane registers the lane an opening event opens.
func (p *Projector) openLane(env *messages.Envelope, name, description, parentCall string) *lane {
	l := p.lanes[env.Lane.StreamID]
	if l == nil {
		l = &lane{stream: env.Lane.StreamID}
		p.lanes[env.Lane.StreamID] = l
	}
	l.name, l.description, l.parentCall = name, description, parentCall
	if env.Lane.StreamID != messages.SynthesisStream {
		l.subagent = p.SubagentRunID(env.Lane.StreamID)
	}
	if parent := p.lanes[env.Lane.ParentStreamID]; parent != nil && parent.open {
		l.parent = parent
		parent.children++
	}
	l.open = true
	p.order = append(p.order, l)
	return l
}

// laneOf returns the lane of an event within a lane. A lane the projector
// never saw open (which a well-formed stream never has) still gets its
// subagentRunId as an attribution-only tag; the run lane speaks as the
// top-level agent.
func (p *Projector) laneOf(env *messages.Envelope) *lane {
	if l := p.lanes[env.Lane.StreamID]; l != nil {
		return l
	}
	l := &lane{stream: env.Lane.StreamID}
	if env.Lane.StreamID != messages.RunStream && env.Lane.StreamID != messages.SynthesisStream {
		l.subagent = p.SubagentRunID(env.Lane.StreamID)
	}
	p.lanes[env.Lane.StreamID] = l
	return l
}

// How a lane ends in AG-UI.
type laneEnd struct {
	ok   bool
	code string
}

var laneOK = laneEnd{ok: true}

func laneError(code string) laneEnd { return laneEnd{code: code} }

// closeLane ends a Conclave lane: its open messages, then SUBAGENT_FINISHED
// (success, with the lane's output as result) or SUBAGENT_ERROR.
func (p *Projector) closeLane(dst []Event, ts time.Time, stream messages.StreamID, end laneEnd, text string) []Event {
	l := p.lanes[stream]
	if l == nil {
		return dst
	}
	// Children close before their parent in Conclave; one that did not is
	// closed here so that AG-UI never sees an orphan.
	for i := len(p.order) - 1; i >= 0; i-- {
		if c := p.order[i]; c.parent == l && c.open {
			dst = p.closeLane(dst, ts, c.stream, laneError("orphaned"), "closed with its parent lane")
		}
	}
	dst = l.closeMessages(dst, ts)
	if l.open && l.subagent != "" {
		if end.ok {
			var result json.RawMessage
			if text != "" {
				result, _ = json.Marshal(text)
			}
			dst = append(dst, &SubagentFinished{Base: base(TypeSubagentFinished, ts), SubagentRunID: l.subagent,
				Result: result, Outcome: &SubagentOutcome{Type: OutcomeSuccess}})
		} else {
			if text == "" {
				text = end.code
			}
			dst = append(dst, &SubagentError{Base: base(TypeSubagentError, ts), SubagentRunID: l.subagent, Message: text, Code: end.code})
		}
	}
	if l.open {
		l.open = false
		if l.parent != nil {
			l.parent.children--
		}
		p.order = slices.DeleteFunc(p.order, func(x *lane) bool { return x == l })
	}
	// A closed lane is forgotten: its events are over (interrupts end before
	// their lane closes), so the state stays proportional to the open lanes.
	delete(p.lanes, stream)
	return dst
}

func (l *lane) closeText(dst []Event, ts time.Time) []Event {
	if l.text != "" {
		dst = append(dst, &TextMessageEnd{Base: base(TypeTextMessageEnd, ts), SubagentRunID: l.subagent, MessageID: l.text})
		l.text = ""
	}
	return dst
}

func (l *lane) closeReasoning(dst []Event, ts time.Time) []Event {
	if l.reasoning != "" {
		dst = append(dst,
			&ReasoningMessageEnd{Base: base(TypeReasoningMessageEnd, ts), SubagentRunID: l.subagent, MessageID: l.reasoning},
			&ReasoningEnd{Base: base(TypeReasoningEnd, ts), SubagentRunID: l.subagent, MessageID: l.reasoning})
		l.reasoning = ""
	}
	return dst
}

func (l *lane) closeMessages(dst []Event, ts time.Time) []Event {
	return l.closeText(l.closeReasoning(dst, ts), ts)
}

func (p *Projector) endInterrupt(id string) *lane {
	i := slices.IndexFunc(p.pending, func(x *pendingInterrupt) bool { return x.p.InterruptID == id })
	if i < 0 {
		return nil
	}
	pi := p.pending[i]
	p.pending = slices.Delete(p.pending, i, i+1)
	if pi.lane != nil {
		pi.lane.parked = slices.DeleteFunc(pi.lane.parked, func(x string) bool { return x == id })
	}
	return pi.lane
}

// closeAll closes everything open in the AG-UI run before its terminal
// event. Lanes still open in Conclave (none, in a well-formed stream: lanes
// close before the run's terminal event) end as SUBAGENT_ERROR; with
// suspend they end as suspended, naming the interrupts they are parked on.
func (p *Projector) closeAll(dst []Event, ts time.Time, suspend bool) []Event {
	for i := len(p.order) - 1; i >= 0; i-- {
		l := p.order[i]
		dst = l.closeMessages(dst, ts)
		if l.subagent == "" {
			continue
		}
		if suspend {
			e := &SubagentFinished{Base: base(TypeSubagentFinished, ts), SubagentRunID: l.subagent, Outcome: &SubagentOutcome{Type: OutcomeSuspended}}
			if len(l.parked) > 0 {
				e.Outcome.InterruptIDs = slices.Clone(l.parked)
			}
			dst = append(dst, e)
		} else {
			dst = append(dst, &SubagentError{Base: base(TypeSubagentError, ts), SubagentRunID: l.subagent,
				Message: "the run ended before this lane closed", Code: "unterminated"})
		}
	}
	// Lanes that are not open (attribution-only) may still hold messages.
	for _, id := range slices.Sorted(maps.Keys(p.lanes)) {
		if l := p.lanes[id]; !l.open {
			dst = l.closeMessages(dst, ts)
		}
	}
	for i := len(p.steps) - 1; i >= 0; i-- {
		dst = append(dst, &StepFinished{Base: base(TypeStepFinished, ts), StepName: p.steps[i]})
	}
	if !suspend {
		p.steps = nil
		p.order = nil
	}
	return dst
}

// Blocked reports whether no agent of the run can make progress on its
// own: every open lane is parked on an interrupt or waits for its open
// child lanes. Agents waiting for a node approval have no lane yet, and
// the director and synthesiser count like any lane. Blocked says nothing
// about the run supervisor, which may be about to start more nodes: callers
// confirm with a short quiet period (see Handler).
func (p *Projector) Blocked() bool {
	for _, l := range p.order {
		if l.open && len(l.parked) == 0 && l.children == 0 {
			return false
		}
	}
	return true
}

// PendingInterrupt is an interrupt of the run that is open in the event
// stream.
type PendingInterrupt struct {
	ID       string
	Kind     messages.InterruptKind
	AgentID  string
	RaisedAt time.Time
}

// Pending lists the run's open interrupts, in the order they were raised.
func (p *Projector) Pending() []PendingInterrupt {
	out := make([]PendingInterrupt, 0, len(p.pending))
	for _, pi := range p.pending {
		out = append(out, PendingInterrupt{ID: pi.p.InterruptID, Kind: pi.p.Kind, AgentID: pi.agentID, RaisedAt: pi.raisedAt})
	}
	return out
}

// Suspend ends the AG-UI run with RUN_FINISHED{outcome: interrupt}. ids
// picks the open interrupts to report (in Pending order; ids must be
// non-empty and name open interrupts), and expires overrides their
// expiresAt (the interrupt registry's clock is the authority; missing ids
// fall back to raise time + timeout). Before the terminal event every
// message and wave step is closed, and every open lane ends as suspended
// (parked lanes naming their interrupts); a STATE_SNAPSHOT precedes
// RUN_FINISHED. Lanes, wave and interrupts stay open in the Projector, so
// the next Begin reopens them.
func (p *Projector) Suspend(dst []Event, ts time.Time, ids []string, expires map[string]time.Time) []Event {
	var interrupts []Interrupt
	for _, pi := range p.pending {
		if slices.Contains(ids, pi.p.InterruptID) {
			interrupts = append(interrupts, p.interrupt(pi, expires[pi.p.InterruptID]))
		}
	}
	dst = p.closeAll(dst, ts, true)
	dst = append(dst, p.snapshot(ts))
	dst = append(dst, &RunFinished{Base: base(TypeRunFinished, ts), ThreadID: p.thread, RunID: p.aguiID,
		Outcome: &RunOutcome{Type: OutcomeInterrupt, Interrupts: interrupts}})
	p.active = false
	return dst
}

// Fail ends the AG-UI run with RUN_ERROR when the stream of the Conclave
// run cannot go on (the server is shutting down, the journal failed). Open
// messages are closed first; the Conclave run may still go on.
func (p *Projector) Fail(dst []Event, ts time.Time, code, message string) []Event {
	for _, l := range p.order {
		dst = l.closeMessages(dst, ts)
	}
	for _, id := range slices.Sorted(maps.Keys(p.lanes)) {
		if l := p.lanes[id]; !l.open {
			dst = l.closeMessages(dst, ts)
		}
	}
	p.active = false
	return append(dst, &RunError{Base: base(TypeRunError, ts), Message: message, Code: code})
}

// Clone returns an independent copy, for replaying an AG-UI run.
func (p *Projector) Clone() *Projector {
	c := *p
	c.lanes = make(map[messages.StreamID]*lane, len(p.lanes))
	m := make(map[*lane]*lane, len(p.lanes))
	for id, l := range p.lanes {
		cp := *l
		cp.parked = slices.Clone(l.parked)
		c.lanes[id] = &cp
		m[l] = &cp
	}
	for _, l := range c.lanes {
		if l.parent != nil {
			if np := m[l.parent]; np != nil {
				l.parent = np
			} else {
				cp := *l.parent // a closed parent: keep a detached copy
				l.parent = &cp
			}
		}
	}
	c.order = make([]*lane, len(p.order))
	for i, l := range p.order {
		c.order[i] = m[l]
	}
	c.steps = slices.Clone(p.steps)
	c.pending = make([]*pendingInterrupt, len(p.pending))
	for i, pi := range p.pending {
		cp := *pi
		if pi.lane != nil {
			cp.lane = m[pi.lane]
		}
		c.pending[i] = &cp
	}
	c.graph = p.graph.clone()
	return &c
}
