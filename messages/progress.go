package messages

import (
	"strings"
	"unicode/utf8"
)

// Payloads of issue 32's events: request_received, turn_started and
// tool_call_progress. The catalogue rows are in types.go.

// RequestReceivedPayload is a run's request as it was received: the
// first event of the run's work, right after run_started.
type RequestReceivedPayload struct {
	// Tenant owns the run (empty: none given).
	Tenant TenantID `json:"tenant,omitempty"`
	// Message is the question, cut to MaxRequestMessageRunes characters
	// with "…" added when it was longer (Truncated).
	Message   string `json:"message"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxRequestMessageRunes bounds request_received's message: the event
// says what was asked, run_started carries the whole question.
const MaxRequestMessageRunes = 200

// NewRequestReceived returns the request_received event of a run of
// tenant asking question.
func NewRequestReceived(tenant TenantID, question string) *RequestReceivedPayload {
	p := &RequestReceivedPayload{Tenant: tenant, Message: question}
	if utf8.RuneCountInString(question) > MaxRequestMessageRunes {
		p.Message, p.Truncated = string([]rune(question)[:MaxRequestMessageRunes])+"…", true
	}
	return p
}

// TurnStartedPayload is published on an agent's lane right before each
// model request it makes; the lane's token_usage of the same turn follows
// when the model has answered.
type TurnStartedPayload struct {
	// Model is the model's name as the engine knows it (the backend's
	// model id; token_usage reports the one the backend answered with).
	Model string `json:"model"`
	// Turn, Role and Attempt are as in token_usage: Turn is 1-based
	// within Attempt; Role is set for a turn made on the lane's behalf
	// by another role (an advisor's check).
	Turn    int    `json:"turn"`
	Role    string `json:"role,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// ToolCallProgressPayload is a running tool call's report of how far it
// has got: from an MCP server's notifications/progress, or a Go tool's
// tool.ReportProgress. Published on the calling agent's lane between the
// call's tool_call_started and tool_call_finished, at most one per call
// every ProgressInterval (reports in between are coalesced: the latest
// one goes out when the interval ends).
type ToolCallProgressPayload struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Progress of Total units; Total is absent when the tool does not
	// know it. Progress grows from one report to the next.
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	// Message says what the call is doing, for people (at most
	// MaxProgressMessageBytes bytes).
	Message string `json:"message,omitempty"`
}

// MaxProgressMessageBytes bounds tool_call_progress's message.
const MaxProgressMessageBytes = 256

// NewToolCallProgress returns the event of a progress report of call
// callID of tool, its message cut to MaxProgressMessageBytes (on a
// character boundary) and made valid UTF-8.
func NewToolCallProgress(callID, tool string, progress, total float64, msg string) *ToolCallProgressPayload {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > MaxProgressMessageBytes {
		cut := MaxProgressMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return &ToolCallProgressPayload{CallID: callID, Tool: tool, Progress: progress, Total: max(total, 0), Message: msg}
}

func (*RequestReceivedPayload) EventType() EventType  { return RequestReceived }
func (*TurnStartedPayload) EventType() EventType      { return TurnStarted }
func (*ToolCallProgressPayload) EventType() EventType { return ToolCallProgress }
