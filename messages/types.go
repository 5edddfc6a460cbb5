package messages

// EventType is the snake_case kind of an event, carried as the envelope's
// "type" field and as the SSE "event:" field. Every known kind is a constant
// below; NewEventType rejects anything else.
type EventType string

// Run lifecycle.
const (
	RunStarted  EventType = "run_started"
	RunFinished EventType = "run_finished"
	RunError    EventType = "run_error"
	// An accepted abort, journaled before it is answered.
	RunAbortRequested EventType = "run_abort_requested"
)

// Rewind.
const (
	RunRewound EventType = "run_rewound"
)

// Planning and the plan gate.
const (
	PlanningStarted EventType = "planning_started"
	PlanProposed    EventType = "plan_proposed"
	PlanningFailed  EventType = "planning_failed"
	PlanApproved    EventType = "plan_approved"
	PlanRejected    EventType = "plan_rejected"
	ReplanAttempt   EventType = "replan_attempt"
	// Progress between tokens.
	NodeProgress      EventType = "node_progress"
	SynthesisProgress EventType = "synthesis_progress"
	NodeCompacting    EventType = "node_compacting"
	// A debate round's all-for-one restart.
	DebateRoundRestarted EventType = "debate_round_restarted"
)

// Waves and council nodes.
const (
	WaveStarted   EventType = "wave_started"
	WaveCompleted EventType = "wave_completed"
	NodeStarted   EventType = "node_started"
	NodeCompleted EventType = "node_completed"
	NodeFailed    EventType = "node_failed"
	NodeCancelled EventType = "node_cancelled"
	NodeSkipped   EventType = "node_skipped"
)

// Streaming output of any agent lane.
const (
	TextDelta        EventType = "text_delta"
	ReasoningDelta   EventType = "reasoning_delta"
	ToolCallStarted  EventType = "tool_call_started"
	ToolCallFinished EventType = "tool_call_finished"
	TokenUsage       EventType = "token_usage"
	AgentRestarted   EventType = "agent_restarted"
	Warning          EventType = "warning"
	// A file an agent wrote (the workspace tool).
	File EventType = "file"
)

// Delegation.
const (
	SubagentStarted  EventType = "subagent_started"
	SubagentFinished EventType = "subagent_finished"
)

// Synthesis.
const (
	SynthesisStarted   EventType = "synthesis_started"
	SynthesisCompleted EventType = "synthesis_completed"
	SynthesisFailed    EventType = "synthesis_failed"
)

// Sessions.
const (
	ReplayTruncated EventType = "replay_truncated"
)

// Cost, teams, sub-teams and steering.
const (
	RunCostEstimate  EventType = "run_cost_estimate"
	TeamStarted      EventType = "team_started"
	TeamSynthesized  EventType = "team_synthesized"
	SubteamSpawned   EventType = "subteam_spawned"
	SteeringReceived EventType = "steering_received"
	SteeringApplied  EventType = "steering_applied"
	SteeringRejected EventType = "steering_rejected"
)

// Debates and dissent.
const (
	DebateRoundStarted   EventType = "debate_round_started"
	DebateTurnStarted    EventType = "debate_turn_started"
	DebateTurnCompleted  EventType = "debate_turn_completed"
	DebateJudgeStarted   EventType = "debate_judge_started"
	DebateJudgeSummary   EventType = "debate_judge_summary"
	DebateRoundCompacted EventType = "debate_round_compacted"
	DebateStanceMap      EventType = "debate_stance_map"
	Dissent              EventType = "dissent"
)

// Advisor gate and citations.
const (
	Advisor       EventType = "advisor"
	Escalation    EventType = "escalation"
	CitationAdded EventType = "citation_added"
)

// Human in the loop.
const (
	InterruptRaised   EventType = "interrupt_raised"
	InterruptResolved EventType = "interrupt_resolved"
	InterruptExpired  EventType = "interrupt_expired"
	// ApprovalSignatureAdded: an approver's valid signature of a
	// policy-covered interrupt (governance).
	ApprovalSignatureAdded EventType = "approval_signature_added"
)

// Issue 32: the request a run answers, each model request, and a running
// tool call's progress.
const (
	RequestReceived  EventType = "request_received"
	TurnStarted      EventType = "turn_started"
	ToolCallProgress EventType = "tool_call_progress"
)

// Remote A2A agents.
const (
	// RemoteTask: a node's remote task (its id, then its status updates).
	RemoteTask EventType = "remote_task"
)

// StreamRole says how an event type relates to the lifecycle of the stream
// (lane) it is published on. The invariant checker in testkit and
// docs/events.md are both driven by it.
type StreamRole int

const (
	// RoleOpens starts its stream; nothing may precede it on that stream.
	RoleOpens StreamRole = iota + 1
	// RoleWithin may only appear while its stream is open.
	RoleWithin
	// RoleCloses ends its stream; nothing may follow it on that stream.
	RoleCloses
	// RolePoint is a stream of exactly one event (opens and closes it).
	RolePoint
	// RoleSession belongs to no run: it is about the subscriber's view of
	// the session (replay_truncated).
	RoleSession
)

func (r StreamRole) String() string {
	switch r {
	case RoleOpens:
		return "opens stream"
	case RoleWithin:
		return "within stream"
	case RoleCloses:
		return "closes stream"
	case RolePoint:
		return "whole stream"
	case RoleSession:
		return "session, no run"
	default:
		return "unknown"
	}
}

// Role reports how t relates to its stream. Unknown types report 0.
func (t EventType) Role() StreamRole {
	if s, ok := specs[t]; ok {
		return s.role
	}
	return 0
}

// Terminal reports whether t ends its run (run_finished or run_error).
func (t EventType) Terminal() bool { return t == RunFinished || t == RunError }

// Known reports whether t is one of the event types defined here.
func (t EventType) Known() bool { _, ok := specs[t]; return ok }

// NewEventType validates s as a known event type.
func NewEventType(s string) (EventType, error) {
	t := EventType(s)
	if !t.Known() {
		return "", &UnknownEventTypeError{Type: s}
	}
	return t, nil
}

// UnknownEventTypeError reports an event type this version does not know.
type UnknownEventTypeError struct{ Type string }

func (e *UnknownEventTypeError) Error() string {
	return "messages: unknown event type " + truncate(e.Type, 64)
}

// EventTypes lists every known event type in documentation order.
func EventTypes() []EventType {
	out := make([]EventType, len(specList))
	for i, s := range specList {
		out[i] = s.typ
	}
	return out
}

// Doc is the one-line description of t used in docs/events.md.
func (t EventType) Doc() string { return specs[t].doc }

// NewPayload returns a zero payload of the concrete type for t.
func (t EventType) NewPayload() (Payload, error) {
	s, ok := specs[t]
	if !ok {
		return nil, &UnknownEventTypeError{Type: string(t)}
	}
	return s.new(), nil
}

type spec struct {
	typ  EventType
	role StreamRole
	new  func() Payload
	doc  string
}

// specList is the catalogue: one row per event type. It is the only table
// that maps kinds to payload types, stream roles and documentation.
var specList = []spec{
	{RunStarted, RoleOpens, func() Payload { return new(RunStartedPayload) }, "First event of every run, exactly once. Opens the run lane. Records the run's options and the files it started with, bytes and all (`files`): a run rebuilt after a restart gives its agents the same ones."},
	{RunFinished, RoleCloses, func() Payload { return new(RunFinishedPayload) }, "Terminal: the run succeeded. Carries the answer, token totals and `files_bytes` (the sizes of the run's file events added up). Exactly one terminal event per run, always last."},
	{RunError, RoleCloses, func() Payload { return new(RunErrorPayload) }, "Terminal: the run failed, was aborted or was interrupted. `code` says which."},
	{RunAbortRequested, RoleWithin, func() Payload { return new(RunAbortRequestedPayload) }, "On the run lane: an abort was accepted. It is journaled (fsynced) before the abort is answered, so the run's terminal event is run_error{code: aborted} even if the server restarts before the run has stopped. At most once per run, before its terminal event."},
	{RunRewound, RoleWithin, func() Payload { return new(RunRewoundPayload) }, "Right after run_started and request_received of a run created by a rewind: the plan it reuses, the wave it re-runs from, the steering note, and the nodes of the earlier waves whose outputs it reuses (they count as completed; they have no lanes in this run)."},
	{RequestReceived, RoleWithin, func() Payload { return new(RequestReceivedPayload) }, "The request the run answers: its tenant and its question cut to 200 characters (`truncated`: \"…\" was added). On the run lane, the first event after run_started, once per run (not again when the run is resumed after a restart)."},
	{PlanningStarted, RoleOpens, func() Payload { return new(PlanningStartedPayload) }, "The director began planning. Opens the director lane."},
	{PlanProposed, RoleCloses, func() Payload { return new(PlanProposedPayload) }, "The director produced a valid plan (a DAG of nodes) and its waves. Closes the director lane."},
	{PlanningFailed, RoleCloses, func() Payload { return new(PlanningFailedPayload) }, "The director could not produce a valid plan. Closes the director lane."},
	{PlanApproved, RoleWithin, func() Payload { return new(PlanApprovedPayload) }, "The plan was approved (automatically when hitl is none)."},
	{PlanRejected, RoleWithin, func() Payload { return new(PlanRejectedPayload) }, "The plan was rejected: the director plans again (replan_attempt) while the run's max_replans allows, else the run ends with run_error plan_rejected."},
	{NodeProgress, RoleWithin, func() Payload { return new(NodeProgressPayload) }, "A worker's model reports how far it has read its prompt (prefill), on the node's lane before its first token: processed of total input tokens, cached, time_ms."},
	{SynthesisProgress, RoleWithin, func() Payload { return new(SynthesisProgressPayload) }, "The same for a synthesiser, on its synthesis lane."},
	{NodeCompacting, RoleWithin, func() Payload { return new(NodeCompactingPayload) }, "A team node's output is being compacted before its dependents receive it, on the team's lane right before team_synthesized{compacted: true}."},
	{DebateRoundRestarted, RoleWithin, func() Payload { return new(DebateRoundRestartedPayload) }, "On a debate node's lane: a turn or the judge of the round failed (its lane closed with restarted: true), and the round starts again from its first speaker, on the lanes of its next attempt (debate:D/r<round>.<attempt>/<agent>)."},
	{ReplanAttempt, RoleWithin, func() Payload { return new(ReplanAttemptPayload) }, "Right after plan_rejected: the director plans again with the rejection's reason, on the lane director:<attempt+1> (planning_started … plan_proposed, as the first plan)."},
	{WaveStarted, RoleWithin, func() Payload { return new(WaveStartedPayload) }, "A wave of ready nodes starts; lists its node ids in deterministic order."},
	{WaveCompleted, RoleWithin, func() Payload { return new(WaveCompletedPayload) }, "Every node of the wave finished (completed, failed, cancelled or skipped)."},
	{NodeStarted, RoleOpens, func() Payload { return new(NodeStartedPayload) }, "A council node began work. Opens the node lane. Never before all its dependencies completed."},
	{NodeCompleted, RoleCloses, func() Payload { return new(NodeCompletedPayload) }, "The node finished; its output is passed to its dependents."},
	{NodeFailed, RoleCloses, func() Payload { return new(NodeFailedPayload) }, "The node failed (model error, or panics beyond the restart limit)."},
	{NodeCancelled, RoleCloses, func() Payload { return new(NodeCancelledPayload) }, "The node was stopped before finishing (a sibling failed, or the run was aborted)."},
	{NodeSkipped, RolePoint, func() Payload { return new(NodeSkippedPayload) }, "The node never ran because a dependency did not complete."},
	{TextDelta, RoleWithin, func() Payload { return new(TextDeltaPayload) }, "A fragment of an agent's answer text."},
	{ReasoningDelta, RoleWithin, func() Payload { return new(ReasoningDeltaPayload) }, "A fragment of an agent's reasoning."},
	{ToolCallStarted, RoleWithin, func() Payload { return new(ToolCallStartedPayload) }, "The model asked for a tool call (every call of its turn, before any runs; awaits_approval: it waits for a human first)."},
	{ToolCallFinished, RoleWithin, func() Payload { return new(ToolCallFinishedPayload) }, "A tool call returned (or was rejected); pairs with tool_call_started by call_id."},
	{ToolCallProgress, RoleWithin, func() Payload { return new(ToolCallProgressPayload) }, "A running tool call reported how far it has got (an MCP server's notifications/progress, or a Go tool's tool.ReportProgress): progress of total (absent: unknown) and a message, on the calling agent's lane between the call's tool_call_started and tool_call_finished. At most one per call every 250 ms (the engine's ProgressInterval); reports in between are coalesced, the latest going out when the interval ends."},
	{TurnStarted, RoleWithin, func() Payload { return new(TurnStartedPayload) }, "Right before each model request, on the lane of the agent it is for: the model, the turn and the attempt (role: a turn made on the lane's behalf, an advisor's check). The turn's token_usage follows when the model has answered."},
	{File, RoleWithin, func() Payload { return new(FilePayload) }, "An agent wrote a file of its run's workspace (the built-in workspace.write tool): its path, size and content, on the writing agent's lane (the envelope's `lane.stream_id`, `lane.depth` and `agent_id`), between the call's tool_call_started and tool_call_finished."},
	{TokenUsage, RoleWithin, func() Payload { return new(TokenUsagePayload) }, "Tokens used by one model turn of the lane's agent."},
	{AgentRestarted, RoleWithin, func() Payload { return new(AgentRestartedPayload) }, "The lane's agent panicked and was restarted by its supervisor; partial output of the failed attempt is discarded."},
	{Warning, RoleWithin, func() Payload { return new(WarningPayload) }, "Something non-fatal worth showing."},
	{SubagentStarted, RoleOpens, func() Payload { return new(SubagentStartedPayload) }, "A delegated sub-agent began. Opens a lane nested under the delegating agent's lane."},
	{SubagentFinished, RoleCloses, func() Payload { return new(SubagentFinishedPayload) }, "The sub-agent ended (ok, failed or cancelled). Closes its lane, before its parent's lane closes."},
	{SynthesisStarted, RoleOpens, func() Payload { return new(SynthesisStartedPayload) }, "The synthesiser began composing the answer. Opens the synthesis lane."},
	{SynthesisCompleted, RoleCloses, func() Payload { return new(SynthesisCompletedPayload) }, "The synthesiser finished; the answer is repeated on run_finished."},
	{SynthesisFailed, RoleCloses, func() Payload { return new(SynthesisFailedPayload) }, "The synthesiser failed or was cancelled."},
	{RunCostEstimate, RoleWithin, func() Payload { return new(RunCostEstimatePayload) }, "Right after plan_proposed, on the run lane: a warn-only estimate of the run's size and cost (2,000 tokens per model-driven node, 50 tokens/s). Never stops the run."},
	{TeamStarted, RoleWithin, func() Payload { return new(TeamStartedPayload) }, "On a team node's lane, right after its node_started: the nested plan (run-wide ids `T/X`) and its waves. The nested nodes' lanes are children of the team's lane, one level deeper; the team's waves are wave_started/wave_completed on the team's lane with `team` set."},
	{TeamSynthesized, RoleWithin, func() Payload { return new(TeamSynthesizedPayload) }, "On a team node's lane after its nested waves and its synthesis lane (`synthesis:T`) closed: the compacted output passed downstream. node_completed follows with the same output."},
	{SubteamSpawned, RoleWithin, func() Payload { return new(SubteamSpawnedPayload) }, "At a wave boundary, on the lane of the graph the worker is in (run, or its team): a worker's spawn_subteam request was approved (spawn gate under hitl node and above). The sub-team joins the plan as team node `team_id`, depending on the worker; it runs from the next wave."},
	{SteeringReceived, RoleOpens, func() Payload { return new(SteeringReceivedPayload) }, "A steering note or diff was posted to the run. Opens the lane `steering:<id>`; a note without a diff is turned into one by the model on this lane."},
	{SteeringApplied, RoleCloses, func() Payload { return new(SteeringAppliedPayload) }, "The diff was applied atomically at the start of wave `applied_at_wave` (before its wave_started); carries the new plan and waves. Closes the steering lane."},
	{SteeringRejected, RoleCloses, func() Payload { return new(SteeringRejectedPayload) }, "The steering changed nothing: the diff was invalid for the plan at the boundary, the model gave no valid diff, or the run ended first. Preceded on its lane by a warning with code `steering_rejected`. Closes the steering lane."},
	{DebateRoundStarted, RoleWithin, func() Payload { return new(DebateRoundStartedPayload) }, "On a debate node's lane: round `round` (1-based) begins; its agents' turns follow in agent order."},
	{DebateTurnStarted, RoleOpens, func() Payload { return new(DebateTurnStartedPayload) }, "Opens one agent's turn lane in a round (`debate:D/r<round>/<agent>`, under the debate node's lane); its text_delta and token_usage follow."},
	{DebateTurnCompleted, RoleCloses, func() Payload { return new(DebateTurnCompletedPayload) }, "Closes an agent's turn lane with its text and declared stance (held when it declared none)."},
	{DebateJudgeStarted, RoleOpens, func() Payload { return new(DebateJudgeStartedPayload) }, "Opens the judge's lane for a round (`judge:D/r<round>`), after every turn of that round closed."},
	{DebateJudgeSummary, RoleCloses, func() Payload { return new(DebateJudgeSummaryPayload) }, "Closes the judge's lane: consensus (from the judge's `CONSENSUS_REACHED:` line, missing = false) and whether the debate stops early (consensus and round >= min_rounds)."},
	{DebateRoundCompacted, RoleWithin, func() Payload { return new(DebateRoundCompactedPayload) }, "On a debate node's lane: an old round's transcript was replaced by a summary in the agents' context (rounds beyond `compact_after`)."},
	{DebateStanceMap, RoleWithin, func() Payload { return new(DebateStanceMapPayload) }, "On a debate node's lane after the last round: each agent's final stance (held, shifted, conceded). Precedes the debate's synthesis lane (`synthesis:D`)."},
	{Dissent, RoleWithin, func() Payload { return new(DissentPayload) }, "On a debate node's lane after its synthesis: one per overruled position (an agent that shifted or conceded), with its opening position. Precedes node_completed."},
	{Advisor, RoleWithin, func() Payload { return new(AdvisorPayload) }, "The advisor checked an agent's terminating turn: gate_continue, gate_redirect (the agent runs another turn with the guidance), gate_halt or gate_budget (redirect budget spent). A halt is followed by escalation, then the lane's failure event."},
	{Escalation, RoleWithin, func() Payload { return new(EscalationPayload) }, "Right after an advisor halt (gate_halt or gate_budget) on the same lane, before the lane closes with a failure."},
	{CitationAdded, RoleWithin, func() Payload { return new(CitationAddedPayload) }, "On the run lane when a wave completes: a source cited for the first time in the run (deduplicated by normalised URL, numbered in node-id order). The answer's Sources section lists them."},
	{ReplayTruncated, RoleSession, func() Payload { return new(ReplayTruncatedPayload) }, "Sent only to a subscriber whose cursor is older than the retained history, right before the earliest retained event: the events after `after` up to `first_retained`-1 were removed by retention. Its `seq` is `first_retained`-1, so the cursor stays contiguous; it has no run (`run_id` is empty, lane `session`)."},
	{InterruptRaised, RoleWithin, func() Payload { return new(InterruptRaisedPayload) }, "An agent needs a human; its actor is parked until the interrupt is resolved or expires. Carries the lane of the raising agent."},
	{InterruptResolved, RoleWithin, func() Payload { return new(InterruptResolvedPayload) }, "A human answered an interrupt."},
	{InterruptExpired, RoleWithin, func() Payload { return new(InterruptExpiredPayload) }, "An interrupt timed out; the configured action was taken."},
	{ApprovalSignatureAdded, RoleWithin, func() Payload { return new(ApprovalSignatureAddedPayload) }, "On the interrupt's lane: a valid ML-DSA-65 signature of an approver for a policy-covered interrupt (see docs/governance.md), with how many the signed decision has and needs; `is_fully_signed` when it reached them (the interrupt_resolved follows)."},
	{RemoteTask, RoleWithin, func() Payload { return new(RemoteTaskPayload) }, "On the lane of a node run by a remote A2A agent (its plan node's `agent`): first the remote task's id and state, journaled before the task's stream is followed (a restarted server re-subscribes to it), then each status update of the remote task with its state and status text. The remote's artifact chunks are the lane's text_delta; its final answer the node's output."},
}

var specs = func() map[EventType]spec {
	m := make(map[EventType]spec, len(specList))
	for _, s := range specList {
		if _, dup := m[s.typ]; dup {
			panic("messages: duplicate spec for " + string(s.typ))
		}
		if got := s.new().EventType(); got != s.typ {
			panic("messages: spec for " + string(s.typ) + " builds a payload of type " + string(got))
		}
		m[s.typ] = s
	}
	return m
}()
