package messages

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Payload is the typed body of an event. Each event type has exactly one
// concrete payload struct, named <Type>Payload.
type Payload interface {
	EventType() EventType
}

// Usage counts model tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadTokens is the part of InputTokens the model's server read
	// from its prompt cache (OpenAI's prompt_tokens_details.cached_tokens),
	// CacheCreateTokens the part it wrote to it (Anthropic's
	// cache_creation_input_tokens; OpenAI-compatible servers that report
	// it); zero when the model does not say (seed 003).
	CacheReadTokens   int64 `json:"cache_read_tokens,omitempty"`
	CacheCreateTokens int64 `json:"cache_create_tokens,omitempty"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		CacheReadTokens:   u.CacheReadTokens + v.CacheReadTokens,
		CacheCreateTokens: u.CacheCreateTokens + v.CacheCreateTokens,
	}
}

// NodeCounts summarises how the nodes of a run ended.
type NodeCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Skipped   int `json:"skipped"`
}

// RunStartedPayload opens a run.
type RunStartedPayload struct {
	Question string    `json:"question"`
	HITL     HITLMode  `json:"hitl"`
	Scenario *Scenario `json:"scenario,omitempty"`
	// Tenant owns the run (and its session); recovery reads it back.
	Tenant TenantID `json:"tenant,omitempty"`
	// RewindOf is set on a run created by a rewind.
	RewindOf *RewindOf `json:"rewind_of,omitempty"`
	// The run's options, so a run rebuilt after a restart keeps them.
	Concurrency            int             `json:"concurrency,omitempty"`
	ApprovalTimeoutSeconds int             `json:"approval_timeout_seconds,omitempty"`
	ApprovalTimeoutAction  Decision        `json:"approval_timeout_action,omitempty"`
	Advisor                *AdvisorOptions `json:"advisor,omitempty"`
	MaxDelegationRounds    int             `json:"max_delegation_rounds,omitempty"`
	MaxReplans             *int            `json:"max_replans,omitempty"`
	// RequestID is the request that started the run (RunIdentity).
	RequestID string `json:"request_id,omitempty"`
	// TraceID is the run's OpenTelemetry trace (32 lowercase hex digits):
	// the trace of the W3C traceparent of the request that started it,
	// else a new one when the server exports traces; empty otherwise.
	// Every span of the run is in it, after a restart too.
	TraceID string `json:"trace_id,omitempty"`
	// TraceParent is the W3C traceparent of the request that started the
	// run, when it sent a valid one: the run's root span is its child.
	TraceParent string `json:"trace_parent,omitempty"`
	// Budget is the run's spend budget: the one asked for in the request,
	// else the tenant's tokens_per_run and cost_per_run (absent: none).
	Budget *RunBudget `json:"budget,omitempty"`
	// Files are the files the run started with (StartRun.Files), with
	// their bytes: every agent of the run is given them, after a restart
	// or a rewind too.
	Files []RunFile `json:"files,omitempty"`
	// Supervision is how the run's agents are supervised, per role: the
	// request's choice over the server's defaults (absent: the built-in
	// strategies and limits).
	Supervision *Supervision `json:"supervision,omitempty"`
}

// RewindOf names what a rewound run re-runs.
type RewindOf struct {
	RunID RunID  `json:"run_id"`
	Wave  int    `json:"wave"`
	Note  string `json:"note,omitempty"`
}

// RunRewoundPayload starts a rewound run from its source run's plan.
type RunRewoundPayload struct {
	From  RunID      `json:"from"`
	Wave  int        `json:"wave"`
	Note  string     `json:"note,omitempty"`
	Plan  Plan       `json:"plan"`
	Waves [][]string `json:"waves"`
	// Reused are the nodes of waves before Wave, with their outputs.
	Reused []ReusedNode `json:"reused"`
}

// ReusedNode is a node output a rewound run takes from its source run.
type ReusedNode struct {
	NodeID string `json:"node_id"`
	Output string `json:"output"`
}

// RunFinishedPayload is the successful terminal event.
type RunFinishedPayload struct {
	Answer string `json:"answer"`
	// Citations are the run's sources, in citation order (the numbers of
	// the synthesiser's inline [N] references); Sources renders them as a
	// "## Sources" section to show after the answer.
	Citations  []Citation `json:"citations,omitempty"`
	Sources    string     `json:"sources,omitempty"`
	Usage      Usage      `json:"usage"`
	Nodes      NodeCounts `json:"nodes"`
	DurationMS int64      `json:"duration_ms"`
	// FilesBytes is the total size of the files the run's agents wrote
	// (its file events' sizes); absent when they wrote none.
	FilesBytes int64 `json:"files_bytes,omitempty"`
	RunIdentity
}

// RunIdentity names, in a run's terminal event, whose run it was: the
// request that started it (the X-Request-Id header, the A2A message id,
// the AG-UI run id, or one the server made), its tenant and its
// conversation (the session).
type RunIdentity struct {
	RequestID      string    `json:"request_id,omitempty"`
	TenantID       TenantID  `json:"tenant_id"`
	ConversationID SessionID `json:"conversation_id"`
}

// ErrorCode says why a run failed (RunErrorPayload.Code).
type ErrorCode string

// Run error codes.
const (
	ErrCodeNodeFailed     ErrorCode = "node_failed"
	ErrCodePlanningFailed ErrorCode = "planning_failed"
	ErrCodePlanRejected   ErrorCode = "plan_rejected"
	ErrCodeSynthesis      ErrorCode = "synthesis_failed"
	ErrCodeAborted        ErrorCode = "aborted"
	ErrCodeInterrupted    ErrorCode = "interrupted"
	ErrCodeInternal       ErrorCode = "internal"
	// ErrCodeAdvisorHalt: the advisor halted a node (or its redirect budget ran out).
	ErrCodeAdvisorHalt ErrorCode = "advisor_halt"
	// ErrCodeDelegationLimit: delegation went past twice max_delegation_rounds.
	ErrCodeDelegationLimit ErrorCode = "delegation_limit"
	// ErrCodeBudgetExceeded: the run published more events than its
	// tenant's events_per_run quota allows, or its model turns spent more
	// tokens or estimated cost than its budget (tokens_per_run,
	// cost_per_run, the request's budget) or its tenant's budget per day
	// (tokens_per_day, cost_per_day).
	ErrCodeBudgetExceeded ErrorCode = "budget_exceeded"
	// ErrCodeNoNodesCompleted: no node of the plan completed (each was
	// rejected, skipped, cancelled or failed), so there is nothing to
	// synthesise; the run ends before its synthesis starts.
	ErrCodeNoNodesCompleted ErrorCode = "no_nodes_completed"
	// ErrCodeInsufficientBudget: the billing pre-flight check (serve
	// --billing-url) denied a model turn because the tenant's budget is
	// spent, or the check failed and billing fails closed.
	ErrCodeInsufficientBudget ErrorCode = "insufficient_budget"
	// ErrCodeTenantSuspended: the billing pre-flight check denied a model
	// turn because the tenant is suspended.
	ErrCodeTenantSuspended ErrorCode = "tenant_suspended"
)

// ModelErrorCode is the stable class of a model failure, carried by the
// failure event of the lane whose turn failed (node_failed,
// planning_failed, synthesis_failed): clients may switch on it, and its
// values do not change.
type ModelErrorCode string

// Model error codes.
const (
	// ModelErrTimeout: the model went silent for longer than the idle
	// timeout between chunks, or its turn outlasted the turn deadline.
	ModelErrTimeout ModelErrorCode = "timeout"
	// ModelErrTurnLimit: the agent used its maximum of model turns (a
	// model that calls tools every turn would otherwise loop, and spend,
	// without end).
	ModelErrTurnLimit ModelErrorCode = "turn_limit"
	// The model server's answers, by class (issue 29). Each failure
	// event's error carries upstream's own text after the class.
	//
	// ModelErrUnreachable: the server could not be reached (connection
	// refused, DNS, TLS), after the retries.
	ModelErrUnreachable ModelErrorCode = "unreachable"
	// ModelErrAuth: the server refused the key (401, 403). Not retried.
	ModelErrAuth ModelErrorCode = "auth"
	// ModelErrRateLimited: 429 after the retries (each honouring
	// Retry-After), or a Retry-After longer than the backend waits.
	ModelErrRateLimited ModelErrorCode = "rate_limited"
	// ModelErrBadRequest: the server refused the request (400, 404, 422).
	// Not retried.
	ModelErrBadRequest ModelErrorCode = "bad_request"
	// ModelErrContextTooLong: the prompt is longer than the model's
	// context window (a 400 that says so). Not retried.
	ModelErrContextTooLong ModelErrorCode = "context_too_long"
	// ModelErrContentFiltered: the server's content filter refused the
	// prompt or the answer. Not retried.
	ModelErrContentFiltered ModelErrorCode = "content_filtered"
	// ModelErrServerError: 5xx (or a dropped connection) after the
	// retries.
	ModelErrServerError ModelErrorCode = "server_error"
	// ModelErrMalformedStream: the answer was not a stream of chunks.
	ModelErrMalformedStream ModelErrorCode = "malformed_stream"
	// ModelErrUnavailable: the endpoint's circuit breaker is open (it
	// failed again and again, and a probe has not seen it answer since):
	// the turn fails at once instead of retrying.
	ModelErrUnavailable ModelErrorCode = "model_unavailable"
)

// RunErrorPayload is the failing terminal event.
type RunErrorPayload struct {
	Code       ErrorCode  `json:"code"`
	Message    string     `json:"message"`
	Usage      Usage      `json:"usage"`
	Nodes      NodeCounts `json:"nodes"`
	DurationMS int64      `json:"duration_ms"`
	// FilesBytes: as run_finished's.
	FilesBytes int64 `json:"files_bytes,omitempty"`
	RunIdentity
}

// RunAbortRequestedPayload records an accepted abort: the run ends with
// run_error{code: aborted, message: reason}, across a restart too.
type RunAbortRequestedPayload struct {
	Reason string `json:"reason"`
}

// PlanningStartedPayload opens the director lane.
type PlanningStartedPayload struct {
	Question string `json:"question"`
}

// PlanProposedPayload carries the validated plan and its waves.
type PlanProposedPayload struct {
	Plan  Plan       `json:"plan"`
	Waves [][]string `json:"waves"`
}

// PlanningFailedPayload closes the director lane on failure.
type PlanningFailedPayload struct {
	Error string `json:"error"`
	// Code classes a model failure (ModelErrorCode); empty for others.
	Code ModelErrorCode `json:"code,omitempty"`
}

// PlanApprovedPayload records the plan gate's approval. When a human
// approved an edited plan, Plan and Waves are the plan that runs.
type PlanApprovedPayload struct {
	Automatic bool       `json:"automatic"`
	Edited    bool       `json:"edited"`
	Plan      *Plan      `json:"plan,omitempty"`
	Waves     [][]string `json:"waves,omitempty"`
}

// PlanRejectedPayload records the plan gate's rejection.
type PlanRejectedPayload struct {
	Reason string `json:"reason,omitempty"`
	// Replanning: the director plans again (replan_attempt follows);
	// otherwise the run ends with run_error plan_rejected.
	Replanning bool `json:"replanning,omitempty"`
}

// PromptProgress is how far a model has read its prompt (the prefill a
// local model's server reports before the first token): Processed of Total
// input tokens, Cached of them served from its cache, in TimeMS so far.
type PromptProgress struct {
	Processed int64 `json:"processed"`
	Total     int64 `json:"total"`
	Cached    int64 `json:"cached"`
	TimeMS    int64 `json:"time_ms"`
}

// NodeProgressPayload: a worker's model reports reading its prompt, on the
// node's lane, between node_started and its first token.
type NodeProgressPayload struct {
	NodeID string `json:"node_id"`
	PromptProgress
}

// SynthesisProgressPayload: the synthesiser's model reports reading its
// prompt, on a synthesis lane.
type SynthesisProgressPayload struct {
	PromptProgress
}

// NodeCompactingPayload: a team node's output is being compacted before
// the nodes that depend on it receive it; team_synthesized follows.
type NodeCompactingPayload struct {
	NodeID string `json:"node_id"`
}

// ReplanAttemptPayload: the director plans again after its plan was
// rejected, told the reason. Attempt is 1-based (the first re-plan is 1);
// its planning runs on the lane DirectorStreamOf(Attempt+1).
type ReplanAttemptPayload struct {
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	Reason      string `json:"reason"`
}

// WaveStartedPayload opens wave Wave (0-based).
type WaveStartedPayload struct {
	Wave    int      `json:"wave"`
	NodeIDs []string `json:"node_ids"`
	// Team is set for a wave of a team's nested plan (on the team's lane).
	Team string `json:"team,omitempty"`
}

// WaveCompletedPayload closes wave Wave.
type WaveCompletedPayload struct {
	Wave      int    `json:"wave"`
	Team      string `json:"team,omitempty"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Cancelled int    `json:"cancelled"`
	Skipped   int    `json:"skipped"`
}

// NodeStartedPayload opens a node lane.
type NodeStartedPayload struct {
	NodeID string   `json:"node_id"`
	Wave   int      `json:"wave"`
	Goal   string   `json:"goal"`
	Deps   []string `json:"deps,omitempty"`
	// Kind is leaf, team or debate (empty = leaf).
	Kind NodeKind `json:"kind,omitempty"`
	Role string   `json:"role,omitempty"`
}

// NodeCompletedPayload closes a node lane with its output.
type NodeCompletedPayload struct {
	NodeID string `json:"node_id"`
	Output string `json:"output"`
	// Citations are the sources the node (and its sub-agents) cited, in
	// first-seen order; the run numbers them when the node's wave ends.
	Citations []Citation `json:"citations,omitempty"`
	Attempts  int        `json:"attempts"`
	Usage     Usage      `json:"usage"`
	// Spawn is the sub-team the worker asked for (its first
	// spawn_subteam call), decided at its wave's end.
	Spawn *SpawnRequest `json:"spawn,omitempty"`
}

// NodeFailedPayload closes a node lane with an error.
type NodeFailedPayload struct {
	NodeID   string `json:"node_id"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
	Panicked bool   `json:"panicked"`
	// Code classes a model failure (ModelErrorCode); empty for others.
	Code ModelErrorCode `json:"code,omitempty"`
}

// NodeCancelledPayload closes a node lane that was stopped from outside.
type NodeCancelledPayload struct {
	NodeID string `json:"node_id"`
	Reason string `json:"reason"`
}

// NodeSkippedPayload is the whole lane of a node that never ran.
type NodeSkippedPayload struct {
	NodeID string `json:"node_id"`
	Reason string `json:"reason"`
	// Dependency is the dependency that did not complete.
	Dependency string `json:"dependency"`
}

// RemoteTaskPayload is a remote A2A agent's task on a node's lane: its id
// (the first one, before the task's stream is followed), then each of its
// status updates.
type RemoteTaskPayload struct {
	// Agent is the registered name of the remote agent.
	Agent string `json:"agent"`
	// TaskID and ContextID are the remote's ids of the task.
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id,omitempty"`
	// State is the remote task's A2A state name (TASK_STATE_WORKING, …).
	State string `json:"state"`
	// Message is the text of the remote status message, if any.
	Message string `json:"message,omitempty"`
}

// TextDeltaPayload is a fragment of answer text.
type TextDeltaPayload struct {
	Delta string `json:"delta"`
}

// ReasoningDeltaPayload is a fragment of reasoning text.
type ReasoningDeltaPayload struct {
	Delta string `json:"delta"`
}

// ToolCallStartedPayload records a tool call.
type ToolCallStartedPayload struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	// DisplayName is the tool's name for people ("Search", "everything:
	// echo"); ArgsSummary the arguments on one short line.
	DisplayName string `json:"display_name"`
	ArgsSummary string `json:"args_summary,omitempty"`
	// AwaitsApproval: the call does not run yet. It waits for a human's
	// approval (a tool_approval interrupt_raised with this call_id
	// follows), and a refusal ends it with an error tool_call_finished.
	// Every call of a turn is published when the model makes it, before
	// any of them runs or waits: tool_call_started says the model asked
	// for the call, tool_call_finished says how it ended.
	AwaitsApproval bool `json:"awaits_approval,omitempty"`
}

// ToolCallFinishedPayload records a tool result.
type ToolCallFinishedPayload struct {
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Result  string `json:"result"`
	IsError bool   `json:"is_error"`
	// DisplayName as in tool_call_started; DurationMS how long the call
	// ran (from its start, after any approval, to its result; 0 for a
	// call refused before it ran), DurationDisplay the same for people
	// ("850ms", "1.2s", "2m05s").
	DisplayName     string `json:"display_name"`
	DurationMS      int64  `json:"duration_ms"`
	DurationDisplay string `json:"duration_display"`
}

// FilePayload is a file an agent wrote in its run's workspace. The
// writing agent and its lane (stream id and depth) are the envelope's.
type FilePayload struct {
	// Path is the file's path in the run's workspace: relative, '/'
	// separated.
	Path string `json:"path"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Encoding is the content's encoding: always FileEncodingUTF8.
	Encoding string `json:"encoding"`
	// Content is the whole file (bounded by the workspace's per-file cap).
	Content string `json:"content"`
	// CallID and Tool are the tool call that wrote it.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
}

// FileEncodingUTF8 is the encoding of every file event's content.
const FileEncodingUTF8 = "utf-8"

// TokenUsagePayload reports one model turn's usage.
type TokenUsagePayload struct {
	Model string `json:"model"`
	Turn  int    `json:"turn"`
	// Role is set for a model turn made on the lane's behalf by another
	// role (an advisor checking the lane's agent): its turn numbers count
	// its own checks, not the lane agent's turns.
	Role string `json:"role,omitempty"`
	// Attempt is the 1-based attempt of the agent that made the turn (it
	// grows when the agent is restarted); Turn counts within it.
	Attempt int `json:"attempt,omitempty"`
	Usage
	// DurationMS is how long the turn took, from its model request to
	// the model's usage report (the end of its stream); FirstTokenMS,
	// from its request to the first chunk of output (text, reasoning or
	// a tool call): the time to first token. Measured by the engine on
	// its clock; omitted when zero (a clock that did not move, or a
	// model that reported usage before any output).
	DurationMS   int64 `json:"duration_ms,omitempty"`
	FirstTokenMS int64 `json:"first_token_ms,omitempty"`
	// CostUSD is the turn's estimated cost in US dollars at the server's
	// model prices (serve --prices); absent when the model has no price:
	// its cost is unknown, not 0.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// AgentRestartedPayload reports a supervisor restart of the lane's agent.
type AgentRestartedPayload struct {
	Attempt int `json:"attempt"`
	// Reason is why: the agent's own failure (its panic, its transient
	// model error), "server restarted", or, for a sibling restarted with
	// a failing agent under all-for-one supervision, "all-for-one: <agent>
	// failed: <its failure>" (docs/supervision.md).
	Reason string `json:"reason"`
}

// WarningPayload is a non-fatal notice.
type WarningPayload struct {
	Code    WarningCode `json:"code"`
	Message string      `json:"message"`
	// SuggestedAction is what a user can do about it (Code.SuggestedAction).
	SuggestedAction string `json:"suggested_action,omitempty"`
}

// NewWarning is a warning with its code's suggested action.
func NewWarning(code WarningCode, message string) *WarningPayload {
	return &WarningPayload{Code: code, Message: message, SuggestedAction: code.SuggestedAction()}
}

// WarningCode says what a warning is about.
type WarningCode string

// Warning codes.
const (
	WarnInvalidOutput       WarningCode = "invalid_output"
	WarnDelegationSoftLimit WarningCode = "delegation_soft_limit"
	WarnSteeringRejected    WarningCode = "steering_rejected"
	WarnSpawnRejected       WarningCode = "spawn_rejected"
	WarnSignatureRefused    WarningCode = "signature_refused"
	// WarnOutputTruncated: a model turn reached the engine's bound on a
	// turn's output; its text was cut there and the turn ended.
	WarnOutputTruncated WarningCode = "output_truncated"
	// WarnTurnLimitNear: an agent has used 80 % of its model turns; at the
	// limit it fails with code turn_limit.
	WarnTurnLimitNear WarningCode = "turn_limit_near"
	// WarnBudgetNear: the run has spent 80 % of its token or cost budget,
	// or its tenant 80 % of a budget per day; past it the run ends with
	// run_error budget_exceeded.
	WarnBudgetNear WarningCode = "budget_near"
)

// SuggestedAction is what a user can do about a warning of code c ("" for
// a code without one).
func (c WarningCode) SuggestedAction() string {
	switch c {
	case WarnInvalidOutput:
		return "None needed if the next turn corrects it; if planning fails, use a stronger director model or simplify the question."
	case WarnDelegationSoftLimit:
		return "Raise max_delegation_rounds if deep delegation is intended; the run fails at twice the limit."
	case WarnSteeringRejected:
		return "Send a note (or graph diff) that fits the plan as it is now, before the waves it changes start."
	case WarnSpawnRejected:
		return "None needed: the run goes on without the sub-team."
	case WarnOutputTruncated:
		return "Ask for a shorter answer, or raise the engine's bound on a turn's output (--model-max-output)."
	case WarnTurnLimitNear:
		return "If the agent is looping on tool calls, abort the run or steer it; raise the engine's turn limit (--max-agent-turns) if long tool use is intended."
	case WarnBudgetNear:
		return "Abort or steer the run if it is looping; ask for a larger budget (budget in the request, or the tenant's quotas) if the work needs it."
	case WarnSignatureRefused:
		return "Check the approver's key and that the statement names this interrupt, its evidence digest and the same edited arguments."
	}
	return ""
}

// DurationDisplay writes a duration for people: "850ms", "1.2s", "2m05s".
func DurationDisplay(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	default:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
}

// SubagentStartedPayload opens a sub-agent lane.
type SubagentStartedPayload struct {
	SubagentID string `json:"subagent_id"`
	Task       string `json:"task"`
	// CallID is the delegating tool call.
	CallID string `json:"call_id"`
	// Async: started by start_async_task; the delegating agent went on
	// without waiting (its task id is SubagentID).
	Async bool `json:"async,omitempty"`
	// Round is the delegation chain length: 1 for a node's sub-agent, one
	// more for each level below.
	Round int `json:"round"`
}

// Outcome is how a sub-agent ended.
type Outcome string

// Sub-agent outcomes.
const (
	OutcomeOK        Outcome = "ok"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
)

// SubagentFinishedPayload closes a sub-agent lane.
type SubagentFinishedPayload struct {
	SubagentID string  `json:"subagent_id"`
	Outcome    Outcome `json:"outcome"`
	Output     string  `json:"output,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// SynthesisStartedPayload opens the synthesis lane.
type SynthesisStartedPayload struct {
	Inputs int `json:"inputs"`
}

// SynthesisCompletedPayload closes the synthesis lane with the answer.
type SynthesisCompletedPayload struct {
	Answer string `json:"answer"`
}

// SynthesisFailedPayload closes the synthesis lane with an error.
type SynthesisFailedPayload struct {
	Error string `json:"error"`
	// Code classes a model failure (ModelErrorCode); empty for others.
	Code ModelErrorCode `json:"code,omitempty"`
}

// InterruptKind is what an interrupt asks a human for.
type InterruptKind string

// Interrupt kinds.
const (
	InterruptToolApproval  InterruptKind = "tool_approval"
	InterruptInfoRequest   InterruptKind = "info_request"
	InterruptPlanApproval  InterruptKind = "plan_approval"
	InterruptNodeApproval  InterruptKind = "node_approval"
	InterruptSpawnApproval InterruptKind = "spawn_approval"
	// InterruptChoice: the agent offers options (ask_choice); the answer
	// names the chosen ids (see ChoiceQuestion).
	InterruptChoice InterruptKind = "choice"
)

// InterruptKinds lists every interrupt kind.
func InterruptKinds() []InterruptKind {
	return []InterruptKind{InterruptToolApproval, InterruptInfoRequest, InterruptPlanApproval, InterruptNodeApproval, InterruptSpawnApproval, InterruptChoice}
}

// Decision is a human's answer to an approval interrupt.
type Decision string

// Decisions. Cancel is never sent by a human: it records an interrupt
// that ended because its run or agent stopped first.
const (
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
	DecisionRevise  Decision = "revise"
	DecisionCancel  Decision = "cancel"
)

// ParseDecision validates a human's decision (approve, reject or revise).
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case DecisionApprove, DecisionReject, DecisionRevise:
		return d, nil
	}
	return "", fmt.Errorf("messages: decision %q is not one of approve, reject, revise", truncate(s, 32))
}

// InterruptRaisedPayload describes what the agent needs. Fields beyond the
// first three are set according to Kind.
type InterruptRaisedPayload struct {
	InterruptID    string        `json:"interrupt_id"`
	Kind           InterruptKind `json:"kind"`
	TimeoutSeconds int           `json:"timeout_seconds"`
	// ExpiresAt is when the timeout action is taken if nobody answers.
	ExpiresAt time.Time `json:"expires_at"`
	// TimeoutAction is what the expiry decides: the run's
	// approval_timeout_action, except that an info request, and an
	// interrupt that needs approvers' signatures (approval), are always
	// rejected: a timer never grants what a policy requires signatures for.
	// A choice also expires rejected: a timer never picks an option.
	TimeoutAction Decision `json:"timeout_action,omitempty"`
	// tool_approval
	ToolName          string          `json:"tool_name,omitempty"`
	ToolArgs          json.RawMessage `json:"tool_args,omitempty"`
	CallID            string          `json:"call_id,omitempty"`
	EvidencePackageID string          `json:"evidence_package_id,omitempty"`
	// info_request, choice
	Question       string `json:"question,omitempty"`
	ContextSnippet string `json:"context_snippet,omitempty"`
	// choice: the options (2..10) and whether several may be chosen.
	Options        []ChoiceOption `json:"options,omitempty"`
	MultipleChoice bool           `json:"multiple_choice,omitempty"`
	// plan_approval, node_approval, spawn_approval
	Plan   *Plan      `json:"plan,omitempty"`
	Waves  [][]string `json:"waves,omitempty"`
	NodeID string     `json:"node_id,omitempty"`
	Goal   string     `json:"goal,omitempty"`
	// SuggestedRoles: a spawn_approval's roles, one node each.
	SuggestedRoles []string `json:"suggested_roles,omitempty"`
	// Evidence is what the human decides on (every approval kind); its
	// risk level decides whether signatures are needed.
	Evidence *EvidencePackage `json:"evidence,omitempty"`
	// Approval, when set, is the policy this interrupt falls under: an
	// approval needs signatures (see docs/governance.md).
	Approval *ApprovalRequirement `json:"approval,omitempty"`
}

// ApprovalRequirement is the m-of-n rule a policy-covered interrupt needs.
type ApprovalRequirement struct {
	// EvidenceDigest is what a statement names (governance.EvidenceDigest
	// of Evidence).
	EvidenceDigest string   `json:"evidence_digest"`
	Required       int      `json:"required"`
	RejectRequired int      `json:"reject_required"`
	Approvers      []string `json:"approvers"`
}

// ApprovalSignatureAddedPayload records a valid signature of a
// policy-covered interrupt.
type ApprovalSignatureAddedPayload struct {
	InterruptID string            `json:"interrupt_id"`
	Approver    string            `json:"approver"`
	Statement   ApprovalStatement `json:"statement"`
	Signature   []byte            `json:"signature"`
	// Count is how many valid signatures the statement's decision has;
	// Required how many it needs.
	Count         int  `json:"count"`
	Required      int  `json:"required"`
	IsFullySigned bool `json:"is_fully_signed"`
}

// InterruptResolvedPayload records the answer to an interrupt.
type InterruptResolvedPayload struct {
	InterruptID string          `json:"interrupt_id"`
	Kind        InterruptKind   `json:"kind"`
	Decision    Decision        `json:"decision,omitempty"`
	Feedback    string          `json:"feedback,omitempty"`
	Response    string          `json:"response,omitempty"`
	EditedArgs  json.RawMessage `json:"edited_args,omitempty"`
	// Choices are the option ids a choice's answer chose.
	Choices []string `json:"choices,omitempty"`
	// Plan is the edited plan of a revised plan approval.
	Plan   *Plan  `json:"plan,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Signers are the approvers whose signatures decided a policy-covered
	// interrupt (their approval_signature_added events carry them).
	Signers []string `json:"signers,omitempty"`
}

// InterruptExpiredPayload records an interrupt's timeout.
type InterruptExpiredPayload struct {
	InterruptID string        `json:"interrupt_id"`
	Kind        InterruptKind `json:"kind"`
	Action      Decision      `json:"action"`
}

// ReplayTruncatedPayload tells a subscriber that retention removed events
// it asked for.
type ReplayTruncatedPayload struct {
	// After is the subscriber's cursor.
	After uint64 `json:"after"`
	// FirstRetained is the earliest seq the journal still holds.
	FirstRetained uint64 `json:"first_retained"`
}

func (*RunStartedPayload) EventType() EventType             { return RunStarted }
func (*RunRewoundPayload) EventType() EventType             { return RunRewound }
func (*RunFinishedPayload) EventType() EventType            { return RunFinished }
func (*RunErrorPayload) EventType() EventType               { return RunError }
func (*RunAbortRequestedPayload) EventType() EventType      { return RunAbortRequested }
func (*PlanningStartedPayload) EventType() EventType        { return PlanningStarted }
func (*PlanProposedPayload) EventType() EventType           { return PlanProposed }
func (*PlanningFailedPayload) EventType() EventType         { return PlanningFailed }
func (*PlanApprovedPayload) EventType() EventType           { return PlanApproved }
func (*PlanRejectedPayload) EventType() EventType           { return PlanRejected }
func (*ReplanAttemptPayload) EventType() EventType          { return ReplanAttempt }
func (*NodeProgressPayload) EventType() EventType           { return NodeProgress }
func (*SynthesisProgressPayload) EventType() EventType      { return SynthesisProgress }
func (*NodeCompactingPayload) EventType() EventType         { return NodeCompacting }
func (*DebateRoundRestartedPayload) EventType() EventType   { return DebateRoundRestarted }
func (*WaveStartedPayload) EventType() EventType            { return WaveStarted }
func (*WaveCompletedPayload) EventType() EventType          { return WaveCompleted }
func (*NodeStartedPayload) EventType() EventType            { return NodeStarted }
func (*NodeCompletedPayload) EventType() EventType          { return NodeCompleted }
func (*NodeFailedPayload) EventType() EventType             { return NodeFailed }
func (*NodeCancelledPayload) EventType() EventType          { return NodeCancelled }
func (*NodeSkippedPayload) EventType() EventType            { return NodeSkipped }
func (*TextDeltaPayload) EventType() EventType              { return TextDelta }
func (*ReasoningDeltaPayload) EventType() EventType         { return ReasoningDelta }
func (*ToolCallStartedPayload) EventType() EventType        { return ToolCallStarted }
func (*ToolCallFinishedPayload) EventType() EventType       { return ToolCallFinished }
func (*FilePayload) EventType() EventType                   { return File }
func (*TokenUsagePayload) EventType() EventType             { return TokenUsage }
func (*AgentRestartedPayload) EventType() EventType         { return AgentRestarted }
func (*WarningPayload) EventType() EventType                { return Warning }
func (*SubagentStartedPayload) EventType() EventType        { return SubagentStarted }
func (*SubagentFinishedPayload) EventType() EventType       { return SubagentFinished }
func (*SynthesisStartedPayload) EventType() EventType       { return SynthesisStarted }
func (*SynthesisCompletedPayload) EventType() EventType     { return SynthesisCompleted }
func (*SynthesisFailedPayload) EventType() EventType        { return SynthesisFailed }
func (*InterruptRaisedPayload) EventType() EventType        { return InterruptRaised }
func (*ReplayTruncatedPayload) EventType() EventType        { return ReplayTruncated }
func (*InterruptResolvedPayload) EventType() EventType      { return InterruptResolved }
func (*InterruptExpiredPayload) EventType() EventType       { return InterruptExpired }
func (*ApprovalSignatureAddedPayload) EventType() EventType { return ApprovalSignatureAdded }
func (*RemoteTaskPayload) EventType() EventType             { return RemoteTask }
