package agui

import (
	"encoding/json"
	"time"
)

// The AG-UI 1.0 wire format: events, interrupts and the run input, as the
// official client (@ag-ui/client 1.0.0) validates them. These types live
// here, not in package messages, because they are AG-UI's format, not
// Conclave's: package messages owns what Conclave itself puts on every
// wire (the envelope), and this package is one projection of it.
//
// Encoding rules (shared/design/protocols.md §1.1), which every type here
// keeps by construction:
//   - camelCase fields, UPPER_SNAKE types, integer millisecond timestamps;
//   - an optional field is omitted, never null (a null is a fatal schema
//     error in the client): every optional field is `omitempty` and every
//     "any JSON" field is a json.RawMessage or a value that is never nil
//     when set;
//   - no field the 1.0 schema does not describe (the client strips unknown
//     material with a warning): extra information goes under metadata;
//   - subagentRunId only on the events that allow it (never on RUN_*).

// EventType is an AG-UI event type.
type EventType string

// The AG-UI event types this projection emits.
const (
	TypeRunStarted              EventType = "RUN_STARTED"
	TypeRunFinished             EventType = "RUN_FINISHED"
	TypeRunError                EventType = "RUN_ERROR"
	TypeStepStarted             EventType = "STEP_STARTED"
	TypeStepFinished            EventType = "STEP_FINISHED"
	TypeTextMessageStart        EventType = "TEXT_MESSAGE_START"
	TypeTextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TypeTextMessageEnd          EventType = "TEXT_MESSAGE_END"
	TypeToolCallStart           EventType = "TOOL_CALL_START"
	TypeToolCallArgs            EventType = "TOOL_CALL_ARGS"
	TypeToolCallEnd             EventType = "TOOL_CALL_END"
	TypeToolCallResult          EventType = "TOOL_CALL_RESULT"
	TypeStateSnapshot           EventType = "STATE_SNAPSHOT"
	TypeStateDelta              EventType = "STATE_DELTA"
	TypeReasoningStart          EventType = "REASONING_START"
	TypeReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	TypeReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	TypeReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	TypeReasoningEnd            EventType = "REASONING_END"
	TypeSubagentStarted         EventType = "SUBAGENT_STARTED"
	TypeSubagentFinished        EventType = "SUBAGENT_FINISHED"
	TypeSubagentError           EventType = "SUBAGENT_ERROR"
	TypeCustom                  EventType = "CUSTOM"
)

// ProtocolVersion is the AG-UI protocol version this endpoint speaks; it is
// declared on RUN_STARTED.
const ProtocolVersion = "1.0"

// Event is one AG-UI event.
type Event interface {
	EventType() EventType
}

// Base holds the fields every event has. Timestamp is in milliseconds since
// the Unix epoch.
type Base struct {
	Type      EventType `json:"type"`
	Timestamp int64     `json:"timestamp,omitempty"`
}

// EventType returns the event's type.
func (b Base) EventType() EventType { return b.Type }

func base(t EventType, ts time.Time) Base { return Base{Type: t, Timestamp: ts.UnixMilli()} }

// Metadata is AG-UI's open metadata object. Conclave's own keys live under
// "conclave" (the key "ag-ui" is reserved by the protocol).
type Metadata map[string]any

// RunStarted opens an AG-UI run.
type RunStarted struct {
	Base
	ThreadID        string   `json:"threadId"`
	RunID           string   `json:"runId"`
	ProtocolVersion string   `json:"protocolVersion,omitempty"`
	ParentRunID     string   `json:"parentRunId,omitempty"`
	Metadata        Metadata `json:"metadata,omitempty"`
}

// RunFinished ends an AG-UI run: success, or interrupt (HITL).
type RunFinished struct {
	Base
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Result   json.RawMessage `json:"result,omitempty"`
	Outcome  *RunOutcome     `json:"outcome,omitempty"`
	Usage    []TokenUsage    `json:"usage,omitempty"`
}

// RunOutcome is RUN_FINISHED.outcome.
type RunOutcome struct {
	// Type is "success", "interrupt" or "cancelled".
	Type       string      `json:"type"`
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Outcome types.
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeSuspended = "suspended"
)

// TokenUsage is one entry of RUN_FINISHED.usage / RUN_ERROR.usage.
type TokenUsage struct {
	Model        string `json:"model,omitempty"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	TotalTokens  int64  `json:"totalTokens"`
}

// RunError ends an AG-UI run with an error.
type RunError struct {
	Base
	Message string       `json:"message"`
	Code    string       `json:"code,omitempty"`
	Usage   []TokenUsage `json:"usage,omitempty"`
}

// StepStarted opens a step (a wave of the council).
type StepStarted struct {
	Base
	StepName string `json:"stepName"`
}

// StepFinished closes a step.
type StepFinished struct {
	Base
	StepName string `json:"stepName"`
}

// TextMessageStart opens a streamed text message.
type TextMessageStart struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
	Role          string `json:"role,omitempty"`
	Name          string `json:"name,omitempty"`
}

// TextMessageContent appends to a text message. Delta is required (it may
// be empty), so it has no omitempty.
type TextMessageContent struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
	Delta         string `json:"delta"`
}

// TextMessageEnd closes a text message.
type TextMessageEnd struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
}

// ToolCallStart opens a tool call.
type ToolCallStart struct {
	Base
	SubagentRunID   string `json:"subagentRunId,omitempty"`
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
}

// ToolCallArgs carries (a fragment of) a tool call's JSON arguments.
type ToolCallArgs struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	ToolCallID    string `json:"toolCallId"`
	Delta         string `json:"delta"`
}

// ToolCallEnd closes a tool call: its arguments are complete.
type ToolCallEnd struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	ToolCallID    string `json:"toolCallId"`
}

// ToolCallResult carries what a tool returned, as a new tool message.
type ToolCallResult struct {
	Base
	SubagentRunID string   `json:"subagentRunId,omitempty"`
	MessageID     string   `json:"messageId"`
	ToolCallID    string   `json:"toolCallId"`
	Content       string   `json:"content"`
	Role          string   `json:"role,omitempty"`
	Metadata      Metadata `json:"metadata,omitempty"`
}

// StateSnapshot replaces the agent state (Conclave's task graph).
type StateSnapshot struct {
	Base
	Snapshot any `json:"snapshot"`
}

// StateDelta patches the agent state with RFC 6902 operations.
type StateDelta struct {
	Base
	Delta []PatchOp `json:"delta"`
}

// PatchOp is one RFC 6902 operation. Only add and replace are emitted, so
// Value is always present.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// ReasoningStart opens a reasoning span.
type ReasoningStart struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
}

// ReasoningMessageStart opens a reasoning message; Role is always "reasoning".
type ReasoningMessageStart struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
	Role          string `json:"role"`
}

// ReasoningMessageContent appends to a reasoning message.
type ReasoningMessageContent struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
	Delta         string `json:"delta"`
}

// ReasoningMessageEnd closes a reasoning message.
type ReasoningMessageEnd struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
}

// ReasoningEnd closes a reasoning span.
type ReasoningEnd struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	MessageID     string `json:"messageId"`
}

// SubagentStarted opens a sub-agent lane: a council node, the director or
// a delegated sub-agent.
type SubagentStarted struct {
	Base
	SubagentRunID       string `json:"subagentRunId"`
	Name                string `json:"name"`
	Description         string `json:"description,omitempty"`
	ParentSubagentRunID string `json:"parentSubagentRunId,omitempty"`
	ParentToolCallID    string `json:"parentToolCallId,omitempty"`
}

// SubagentFinished closes a sub-agent lane for this AG-UI run: success, or
// suspended (parked on interrupts, or still running when the run ended
// with an interrupt outcome; it continues in the next AG-UI run).
type SubagentFinished struct {
	Base
	SubagentRunID string           `json:"subagentRunId"`
	Result        json.RawMessage  `json:"result,omitempty"`
	Outcome       *SubagentOutcome `json:"outcome,omitempty"`
}

// SubagentOutcome is SUBAGENT_FINISHED.outcome.
type SubagentOutcome struct {
	Type         string   `json:"type"`
	InterruptIDs []string `json:"interruptIds,omitempty"`
}

// SubagentError closes a sub-agent lane that failed or was cancelled.
type SubagentError struct {
	Base
	SubagentRunID string `json:"subagentRunId"`
	Message       string `json:"message"`
	Code          string `json:"code,omitempty"`
}

// Custom carries a Conclave event with no AG-UI counterpart. Name is
// "conclave.<event type>", Value the event's payload as in docs/events.md.
type Custom struct {
	Base
	SubagentRunID string `json:"subagentRunId,omitempty"`
	Name          string `json:"name"`
	Value         any    `json:"value"`
}

// Interrupt is one entry of RUN_FINISHED.outcome.interrupts.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       Metadata        `json:"metadata,omitempty"`
	SubagentRunID  string          `json:"subagentRunId,omitempty"`
}

// Interrupt reasons. The first three are AG-UI's core reasons; custom ones
// are namespaced "conclave:<name>".
const (
	ReasonToolCall      = "tool_call"
	ReasonInputRequired = "input_required"
	ReasonConfirmation  = "confirmation"
	ReasonPlanApproval  = "conclave:plan_approval"
)

// RunAgentInput is the body of POST /api/v1/agui, as HttpAgent sends it.
// Decoding is lenient about fields it does not know: AG-UI objects are open.
type RunAgentInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []InputMessage    `json:"messages"`
	Tools           []json.RawMessage `json:"tools,omitempty"`
	Context         []InputContext    `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry     `json:"resume,omitempty"`
}

// InputMessage is the part of an AG-UI message the endpoint reads: the
// question is the content of the last user message.
type InputMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
}

// InputContext is one entry of RunAgentInput.context.
type InputContext struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one interrupt of the previous AG-UI run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Resume statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)
