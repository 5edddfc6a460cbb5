package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// AnswerArtifactID is the artifact that carries the council's answer.
const AnswerArtifactID = "answer"

const answerDescription = "The council's answer"

// Projector turns the seq-ordered events of one run into A2A stream frames
// and keeps the task they describe. It is pure: no I/O, no clock, no
// randomness. The frames of an event depend only on the events applied
// before it, so every subscriber that applies the run's events from its
// first one gets byte-identical frames in the same order, whichever
// subscription delivered them and however they were batched. That is how
// several streams of one task (SendStreamingMessage, SubscribeToTask) agree
// without sharing anything but the session's journal.
//
// A Projector is used by one goroutine.
type Projector struct {
	taskID    string
	contextID string
	question  string

	status    TaskStatus // the latest status; a Task snapshot reports it
	artifacts []*artifactState
	byID      map[string]*artifactState
	about     map[messages.StreamID]string // lane → goal or sub-task, for artifact descriptions
	open      []OpenInterrupt              // pending interrupts, in the order they were raised
}

type artifactState struct {
	id, name, description string
	text                  []byte
	closed                bool
}

// OpenInterrupt is an interrupt of the task that waits for an answer.
type OpenInterrupt struct {
	*messages.InterruptRaisedPayload
	AgentID  string
	Lane     messages.StreamID
	RaisedAt time.Time
}

// NewProjector starts the projection of the run sum describes. Before the
// first event the task is TASK_STATE_SUBMITTED, stamped with the run's
// creation time.
func NewProjector(sum messages.RunSummary) *Projector {
	return &Projector{
		taskID: string(sum.RunID), contextID: string(sum.SessionID), question: sum.Question,
		status: TaskStatus{State: StateSubmitted, Timestamp: timestamp(sum.CreatedAt)},
		byID:   map[string]*artifactState{},
		about:  map[messages.StreamID]string{},
	}
}

// State is the task's current state.
func (p *Projector) State() TaskState { return p.status.State }

// Final reports whether a stream of this task ends here: the task reached
// a terminal state or waits for input (spec §3.1.2).
func (p *Projector) Final() bool { return p.status.State.Terminal() || p.status.State.Interrupted() }

// Open lists the task's pending interrupts, oldest first.
func (p *Projector) Open() []OpenInterrupt { return append([]OpenInterrupt(nil), p.open...) }

// IsOpen reports whether interrupt id is pending.
func (p *Projector) IsOpen(id string) bool {
	for _, o := range p.open {
		if o.InterruptID == id {
			return true
		}
	}
	return false
}

// Task is a snapshot of the task: its latest status and every artifact,
// each as one text part with everything streamed into it so far.
func (p *Projector) Task() *Task {
	t := &Task{ID: p.taskID, ContextID: p.contextID, Status: p.status, Metadata: taskMeta(p.question)}
	for _, a := range p.artifacts {
		t.Artifacts = append(t.Artifacts, Artifact{ArtifactID: a.id, Name: a.name, Description: a.description,
			Parts: []Part{TextPart(string(a.text))}})
	}
	return t
}

// Apply folds env into the task and returns the frames it projects to (none
// for events of other runs, for events after the terminal one, and for
// events the mapping drops). The mapping is documented in doc.go.
func (p *Projector) Apply(env *messages.Envelope) []StreamResponse {
	if string(env.RunID) != p.taskID || p.status.State.Terminal() {
		return nil
	}
	lane := env.Lane.StreamID
	switch pl := env.Payload.(type) {
	case *messages.RunStartedPayload:
		return p.status1(env, StateWorking, "Council started: "+clip(pl.Question, 200))
	case *messages.PlanningStartedPayload:
		return p.progress(env, "Planning the council")
	case *messages.PlanProposedPayload:
		return p.progress(env, fmt.Sprintf("Plan proposed: %d nodes in %d waves", len(pl.Plan.Nodes), len(pl.Waves)))
	case *messages.PlanningFailedPayload:
		return p.progress(env, "Planning failed: "+pl.Error)
	case *messages.PlanApprovedPayload:
		switch {
		case pl.Edited && pl.Plan != nil:
			return p.progress(env, fmt.Sprintf("Edited plan approved: %d nodes in %d waves", len(pl.Plan.Nodes), len(pl.Waves)))
		case pl.Automatic:
			return p.progress(env, "Plan approved automatically")
		}
		return p.progress(env, "Plan approved")
	case *messages.RunRewoundPayload:
		return p.progress(env, fmt.Sprintf("Rewound from run %s: wave %d runs again, %d node outputs reused", pl.From, pl.Wave+1, len(pl.Reused)))
	case *messages.PlanRejectedPayload:
		return p.progress(env, strings.TrimSuffix("Plan rejected: "+pl.Reason, ": "))
	case *messages.ReplanAttemptPayload:
		return p.progress(env, fmt.Sprintf("Re-planning (attempt %d of %d)", pl.Attempt, pl.MaxAttempts))
	case *messages.NodeCompactingPayload:
		return p.progress(env, pl.NodeID+": compacting its output")
	case *messages.WaveStartedPayload:
		return p.progress(env, fmt.Sprintf("Wave %d started: %s", pl.Wave+1, strings.Join(pl.NodeIDs, ", ")))
	case *messages.WaveCompletedPayload:
		return p.progress(env, fmt.Sprintf("Wave %d done: %d completed, %d failed, %d cancelled, %d skipped",
			pl.Wave+1, pl.Completed, pl.Failed, pl.Cancelled, pl.Skipped))
	case *messages.NodeStartedPayload:
		p.about[lane] = pl.Goal
		return p.progress(env, pl.NodeID+" started: "+pl.Goal)
	case *messages.NodeCompletedPayload:
		return p.final(env, pl.Output)
	case *messages.NodeFailedPayload:
		return append(p.abandon(env), p.progress(env, pl.NodeID+" failed: "+pl.Error)...)
	case *messages.NodeCancelledPayload:
		return append(p.abandon(env), p.progress(env, pl.NodeID+" cancelled: "+pl.Reason)...)
	case *messages.NodeSkippedPayload:
		return p.progress(env, pl.NodeID+" skipped: "+pl.Reason)
	case *messages.TextDeltaPayload:
		return p.chunk(env, pl.Delta)
	case *messages.ToolCallStartedPayload:
		return p.progress(env, fmt.Sprintf("%s called %s", env.AgentID, pl.Tool))
	case *messages.ToolCallFinishedPayload:
		if pl.IsError {
			return p.progress(env, fmt.Sprintf("%s: %s failed: %s", env.AgentID, pl.Tool, clip(pl.Result, 200)))
		}
		return p.progress(env, fmt.Sprintf("%s: %s returned", env.AgentID, pl.Tool))
	case *messages.ToolCallProgressPayload:
		return p.progress(env, toolProgressText(env.AgentID, pl))
	case *messages.FilePayload:
		return p.progress(env, fmt.Sprintf("%s wrote %s (%d bytes)", env.AgentID, pl.Path, pl.Size))
	case *messages.AgentRestartedPayload:
		return append(p.reset(env), p.progress(env, fmt.Sprintf("%s restarted (attempt %d): %s", env.AgentID, pl.Attempt, pl.Reason))...)
	case *messages.ReplayTruncatedPayload:
		// Session-level and only for a subscriber behind retention: a task's
		// frames are about its run; its snapshot (GetTask) is rebuilt from
		// what the journal retains.
		return nil
	case *messages.WarningPayload:
		return p.progress(env, fmt.Sprintf("Warning from %s (%s): %s", env.AgentID, pl.Code, pl.Message))
	case *messages.SubagentStartedPayload:
		p.about[lane] = pl.Task
		return p.progress(env, pl.SubagentID+" started: "+pl.Task)
	case *messages.SubagentFinishedPayload:
		if pl.Outcome == messages.OutcomeOK {
			return p.final(env, pl.Output)
		}
		return append(p.abandon(env), p.progress(env, fmt.Sprintf("%s %s: %s", pl.SubagentID, pl.Outcome, pl.Error))...)
	case *messages.SynthesisStartedPayload:
		return p.progress(env, fmt.Sprintf("Synthesising the answer from %d inputs", pl.Inputs))
	case *messages.SynthesisCompletedPayload:
		return p.final(env, pl.Answer)
	case *messages.SynthesisFailedPayload:
		return append(p.abandon(env), p.progress(env, "Synthesis failed: "+pl.Error)...)
	case *messages.InterruptRaisedPayload:
		p.open = append(p.open, OpenInterrupt{InterruptRaisedPayload: pl, AgentID: env.AgentID, Lane: lane, RaisedAt: env.Timestamp})
		return p.inputRequired(env)
	case *messages.InterruptResolvedPayload:
		return p.settle(env, pl.InterruptID, "Input received, resuming")
	case *messages.InterruptExpiredPayload:
		return p.settle(env, pl.InterruptID, fmt.Sprintf("Nobody answered in time: %s taken, resuming", pl.Action))
	case *messages.RemoteTaskPayload:
		text := fmt.Sprintf("%s: remote agent %s, task %s: %s", env.AgentID, pl.Agent, pl.TaskID, pl.State)
		if pl.Message != "" {
			text += ": " + clip(pl.Message, 200)
		}
		return p.progress(env, text)
	case *messages.ApprovalSignatureAddedPayload:
		return p.progress(env, fmt.Sprintf("%s signed %s of interrupt %s: %d of %d signatures", pl.Approver, pl.Statement.Decision, pl.InterruptID, pl.Count, pl.Required))
	case *messages.RunAbortRequestedPayload:
		return p.progress(env, "Cancel accepted: "+clip(pl.Reason, 200))
	case *messages.RunCostEstimatePayload:
		return p.progress(env, fmt.Sprintf("Estimated cost: %d agents, about %d tokens, about %d s", pl.NodeCount, pl.EstTokens, pl.EstWallSeconds))
	case *messages.TeamStartedPayload:
		return p.progress(env, fmt.Sprintf("Team %s started: %d nodes in %d waves", pl.TeamID, len(pl.Plan.Nodes), len(pl.Waves)))
	case *messages.TeamSynthesizedPayload:
		return p.progress(env, "Team "+pl.TeamID+" synthesised its findings")
	case *messages.SubteamSpawnedPayload:
		return p.progress(env, fmt.Sprintf("%s spawned sub-team %s (%s)", pl.ParentNodeID, pl.TeamID, pl.ChildGraphSummary))
	case *messages.SteeringReceivedPayload:
		return p.progress(env, "Steering received: "+clip(pl.Note, 200))
	case *messages.SteeringAppliedPayload:
		return p.progress(env, fmt.Sprintf("Steering %s applied at wave %d", pl.SteeringID, pl.AppliedAtWave+1))
	case *messages.SteeringRejectedPayload:
		return p.progress(env, fmt.Sprintf("Steering %s rejected: %s", pl.SteeringID, clip(pl.Error, 200)))
	case *messages.DebateRoundStartedPayload:
		return p.progress(env, fmt.Sprintf("Debate %s: round %d", pl.NodeID, pl.Round))
	case *messages.DebateJudgeSummaryPayload:
		if pl.Restarted || pl.Cancelled {
			return nil // debate_round_restarted, or the debate's end, says it
		}
		return p.progress(env, fmt.Sprintf("Debate %s: judge of round %d: consensus %t", pl.NodeID, pl.Round, pl.Consensus))
	case *messages.DebateRoundRestartedPayload:
		return p.progress(env, fmt.Sprintf("Debate %s: round %d starts again (attempt %d): %s", pl.NodeID, pl.Round, pl.Attempt, clip(pl.Reason, 200)))
	case *messages.DebateStanceMapPayload:
		parts := make([]string, len(pl.Stances))
		for i, st := range pl.Stances {
			parts[i] = st.AgentID + " " + string(st.Stance)
		}
		return p.progress(env, fmt.Sprintf("Debate %s ended after %d rounds: %s", pl.NodeID, pl.Rounds, strings.Join(parts, ", ")))
	case *messages.DissentPayload:
		return p.progress(env, fmt.Sprintf("Dissent of %s in %s: %s", pl.DissentingAgentID, pl.ConflictID, clip(pl.Position, 200)))
	case *messages.AdvisorPayload:
		return p.progress(env, strings.TrimSuffix(fmt.Sprintf("Advisor on %s: %s: %s", env.AgentID, pl.Kind, pl.Detail), ": "))
	case *messages.EscalationPayload:
		return p.progress(env, fmt.Sprintf("Escalation from %s: %s", env.AgentID, pl.Reason))
	case *messages.CitationAddedPayload:
		return p.progress(env, fmt.Sprintf("Source [%d]: %s", pl.Number, pl.URL))
	case *messages.RunFinishedPayload:
		var out []StreamResponse
		if a := p.byID[AnswerArtifactID]; a == nil || !a.closed || string(a.text) != pl.Answer {
			out = p.replace(env, AnswerArtifactID, AnswerArtifactID, answerDescription, pl.Answer)
		}
		return append(out, p.status1(env, StateCompleted, pl.Answer)...)
	case *messages.RunErrorPayload:
		return p.status1(env, errorState(pl.Code), fmt.Sprintf("%s: %s", pl.Code, pl.Message))
	}
	// reasoning_delta, token_usage, turn_started, request_received, debate
	// turns and the judge's lane opening: not part of the task's A2A view (their text is, in the
	// lanes' artifacts).
	return nil
}

// toolProgressText is a tool call's progress report as a WORKING status:
// "<agent>: <tool> 40/100 <message>" (no "/total" when it is unknown).
func toolProgressText(agent string, pl *messages.ToolCallProgressPayload) string {
	s := fmt.Sprintf("%s: %s %g", agent, pl.Tool, pl.Progress)
	if pl.Total > 0 {
		s += fmt.Sprintf("/%g", pl.Total)
	}
	if pl.Message != "" {
		s += " " + pl.Message
	}
	return s
}

// errorState is the task state of a run that ended with run_error.
func errorState(code messages.ErrorCode) TaskState {
	switch code {
	case messages.ErrCodeAborted:
		return StateCanceled
	case messages.ErrCodePlanRejected:
		return StateRejected
	}
	return StateFailed
}

// status1 sets the task's status and reports it.
func (p *Projector) status1(env *messages.Envelope, state TaskState, text string, parts ...Part) []StreamResponse {
	msg := p.message(env, append([]Part{TextPart(text)}, parts...)...)
	p.status = TaskStatus{State: state, Message: msg, Timestamp: timestamp(env.Timestamp)}
	return []StreamResponse{{StatusUpdate: &TaskStatusUpdateEvent{TaskID: p.taskID, ContextID: p.contextID, Status: p.status}}}
}

// progress reports work in progress. While the task waits for input it
// reports nothing: the status must keep saying what input is needed (no
// stream is open then anyway; every stream closed on INPUT_REQUIRED), and
// what the other lanes produce meanwhile still reaches the artifacts.
func (p *Projector) progress(env *messages.Envelope, text string) []StreamResponse {
	if p.status.State == StateInputRequired {
		return nil
	}
	return p.status1(env, StateWorking, text)
}

// inputRequired reports the open interrupts: for each a text prompt and a
// data part with what a resume needs (§2.4 of protocols.md).
func (p *Projector) inputRequired(env *messages.Envelope) []StreamResponse {
	text := "Input required"
	if len(p.open) > 1 {
		text = fmt.Sprintf("Input required: %d questions are open; a text answer answers the first, data parts naming an interruptId any", len(p.open))
	}
	var parts []Part
	for _, o := range p.open {
		parts = append(parts, TextPart(prompt(o)), DataPart(interruptData(o)))
	}
	return p.status1(env, StateInputRequired, text, parts...)
}

// settle closes interrupt id. When none is left open the task works again;
// otherwise the input-required status is restated with the ones left.
func (p *Projector) settle(env *messages.Envelope, id, text string) []StreamResponse {
	i := -1
	for k, o := range p.open {
		if o.InterruptID == id {
			i = k
		}
	}
	if i < 0 {
		return nil
	}
	p.open = append(p.open[:i:i], p.open[i+1:]...)
	if len(p.open) > 0 {
		return p.inputRequired(env)
	}
	return p.status1(env, StateWorking, text)
}

// artifactFor names the artifact of env's lane: the answer for the
// synthesiser, one per node or sub-agent lane, none for the run and the
// director (whose text is the plan, reported by plan_proposed).
func (p *Projector) artifactFor(env *messages.Envelope) (id, name, description string, ok bool) {
	if messages.ParseStreamID(env.Lane.StreamID).Kind == messages.LaneDirector { // every plan's director
		return "", "", "", false
	}
	switch lane := env.Lane.StreamID; lane {
	case messages.RunStream:
		return "", "", "", false
	case messages.SynthesisStream:
		return AnswerArtifactID, AnswerArtifactID, answerDescription, true
	default:
		return string(lane), env.AgentID, p.about[lane], true
	}
}

// chunk streams a text fragment into the lane's artifact. The first chunk
// creates the artifact (append false); later ones append.
func (p *Projector) chunk(env *messages.Envelope, delta string) []StreamResponse {
	id, name, desc, ok := p.artifactFor(env)
	if !ok {
		return nil
	}
	a := p.byID[id]
	if a != nil && a.closed {
		return nil // lanes do not stream after they close; ignore if one did
	}
	if a == nil {
		a = p.newArtifact(id, name, desc)
		a.text = append(a.text, delta...)
		return p.artifactFrame(env, Artifact{ArtifactID: id, Name: name, Description: desc, Parts: []Part{TextPart(delta)}}, false, false)
	}
	a.text = append(a.text, delta...)
	return p.artifactFrame(env, Artifact{ArtifactID: id, Parts: []Part{TextPart(delta)}}, true, false)
}

// final replaces the lane's artifact with its complete output and closes
// it: the output is authoritative (a restarted agent's discarded attempt,
// for one, is not in it).
func (p *Projector) final(env *messages.Envelope, output string) []StreamResponse {
	id, name, desc, ok := p.artifactFor(env)
	if !ok {
		return nil
	}
	return p.replace(env, id, name, desc, output)
}

// replace sets artifact id to output and closes it.
func (p *Projector) replace(env *messages.Envelope, id, name, desc, output string) []StreamResponse {
	a := p.byID[id]
	if a == nil {
		a = p.newArtifact(id, name, desc)
	}
	a.text, a.closed = []byte(output), true
	return p.artifactFrame(env, Artifact{ArtifactID: id, Name: name, Description: desc, Parts: []Part{TextPart(output)}}, false, true)
}

// abandon closes the lane's artifact, if it has an open one, with an empty
// last chunk: the lane failed or was stopped and will stream no more.
func (p *Projector) abandon(env *messages.Envelope) []StreamResponse {
	id, _, _, ok := p.artifactFor(env)
	a := p.byID[id]
	if !ok || a == nil || a.closed {
		return nil
	}
	a.closed = true
	return p.artifactFrame(env, Artifact{ArtifactID: id, Parts: []Part{TextPart("")}}, true, true)
}

// reset empties the lane's open artifact: a restarted agent's partial
// output is discarded.
func (p *Projector) reset(env *messages.Envelope) []StreamResponse {
	id, name, desc, ok := p.artifactFor(env)
	a := p.byID[id]
	if !ok || a == nil || a.closed {
		return nil
	}
	a.text = a.text[:0]
	return p.artifactFrame(env, Artifact{ArtifactID: id, Name: name, Description: desc, Parts: []Part{TextPart("")}}, false, false)
}

func (p *Projector) newArtifact(id, name, desc string) *artifactState {
	a := &artifactState{id: id, name: name, description: desc}
	p.artifacts = append(p.artifacts, a)
	p.byID[id] = a
	return a
}

func (p *Projector) artifactFrame(env *messages.Envelope, a Artifact, appendTo, last bool) []StreamResponse {
	return []StreamResponse{{ArtifactUpdate: &TaskArtifactUpdateEvent{
		TaskID: p.taskID, ContextID: p.contextID, Artifact: a, Append: appendTo, LastChunk: last, Metadata: eventMeta(env),
	}}}
}

func (p *Projector) message(env *messages.Envelope, parts ...Part) *Message {
	return &Message{MessageID: env.ID.String(), ContextID: p.contextID, TaskID: p.taskID, Role: RoleAgent,
		Parts: parts, Metadata: eventMeta(env)}
}

// EventRef is the metadata every projected frame carries under the key
// "conclave": the event it was projected from.
type EventRef struct {
	Seq     uint64             `json:"seq"`
	Event   messages.EventType `json:"event"`
	Lane    messages.StreamID  `json:"lane"`
	AgentID string             `json:"agentId"`
}

type frameMeta struct {
	Conclave EventRef `json:"conclave"`
}

func eventMeta(env *messages.Envelope) json.RawMessage {
	b, _ := json.Marshal(frameMeta{Conclave: EventRef{Seq: env.Seq, Event: env.Type, Lane: env.Lane.StreamID, AgentID: env.AgentID}})
	return b
}

type taskInfo struct {
	Conclave struct {
		Question string `json:"question"`
	} `json:"conclave"`
}

func taskMeta(question string) json.RawMessage {
	var m taskInfo
	m.Conclave.Question = question
	b, _ := json.Marshal(m)
	return b
}

// timestamp formats t as ProtoJSON wants a google.protobuf.Timestamp: UTC,
// "Z", fixed millisecond precision.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// clip shortens s to at most n bytes (on a rune boundary) for a status line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
