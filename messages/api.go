package messages

import "time"

// Bodies of the HTTP API (see docs/api.md). Requests reuse the commands:
// POST /api/v1/runs takes a StartRun.

// RunCreated answers POST /api/v1/runs.
type RunCreated struct {
	RunID     RunID     `json:"run_id"`
	SessionID SessionID `json:"session_id"`
	StreamURL string    `json:"stream_url"`
	WSURL     string    `json:"ws_url"`
}

// Page sizes of the list endpoints (GET /api/v1/runs, /api/v1/interrupts):
// ?limit= is 1..MaxPageLimit, DefaultPageLimit when not given.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
)

// RunList answers GET /api/v1/runs.
type RunList struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor is passed as ?cursor= for the next page; empty on the last page.
	NextCursor RunID `json:"next_cursor,omitempty"`
}

// Readiness answers GET /readyz: 200 {"status":"ready"} when the server
// can take work (its journal accepts writes), else 503
// {"status":"not_ready","not_ready":[{"component":"journal","reason":"…"}]}.
// GET /healthz is liveness only: it stays 200 while the process serves.
type Readiness struct {
	Status   string     `json:"status"` // ReadyStatus or NotReadyStatus
	NotReady []NotReady `json:"not_ready,omitempty"`
}

// NotReady names one part of the server that is not ready, and why.
type NotReady struct {
	Component string `json:"component"` // "journal", "server" (shutting down)
	Reason    string `json:"reason"`
}

// Readiness statuses.
const (
	ReadyStatus    = "ready"
	NotReadyStatus = "not_ready"
)

// ErrorBody is every API error: {"error":{"code":"...","message":"..."}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError is the body of ErrorBody.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WSClientMessage is a frame a WebSocket client may send:
//
//	{"type":"subscribe","after":N}
//	{"type":"resume","interrupt_id":"…","decision":"approve",…,"request_id":"…"}
type WSClientMessage struct {
	Type string `json:"type"`
	// After (subscribe) is the last seq the client has; the stream restarts after it.
	After uint64 `json:"after,omitempty"`
	// RequestID (resume) is echoed in the reply.
	RequestID string `json:"request_id,omitempty"`
	// InterruptID and the Resume fields (resume) answer an interrupt.
	InterruptID string `json:"interrupt_id,omitempty"`
	Resume
}

// WebSocket client message types.
const (
	WSSubscribe = "subscribe"
	WSResume    = "resume"
)

// WSReply answers a client's resume frame. It is a line of its own in a
// server text message; envelopes have a "seq", replies a "reply_to".
type WSReply struct {
	ReplyTo     string    `json:"reply_to"`
	RequestID   string    `json:"request_id,omitempty"`
	InterruptID string    `json:"interrupt_id"`
	OK          bool      `json:"ok"`
	Status      int       `json:"status"`
	Error       *APIError `json:"error,omitempty"`
}

// InterruptStatus is where an interrupt is in its life.
type InterruptStatus string

// Interrupt statuses.
const (
	InterruptPending   InterruptStatus = "pending"
	InterruptResolving InterruptStatus = "resolving"
	InterruptAnswered  InterruptStatus = "resolved"
	InterruptTimedOut  InterruptStatus = "expired"
	InterruptCancelled InterruptStatus = "cancelled"
)

// Interrupt is an interrupt as GET /api/v1/interrupts lists it: what was
// raised, by whom, and until when it waits.
type Interrupt struct {
	*InterruptRaisedPayload
	SessionID SessionID       `json:"session_id"`
	RunID     RunID           `json:"run_id"`
	AgentID   string          `json:"agent_id"`
	Lane      Lane            `json:"lane"`
	Status    InterruptStatus `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// Seq is the seq of its interrupt_raised event.
	Seq uint64 `json:"seq,omitempty"`
	// Signed lists the valid signatures a policy-covered interrupt has so
	// far (see Approval in the raised payload for what it needs).
	Signed []SignedBy `json:"signed,omitempty"`
}

// SignedBy is one approver's counted signature.
type SignedBy struct {
	Approver string   `json:"approver"`
	Decision Decision `json:"decision"`
}

// InterruptList answers GET /api/v1/interrupts.
type InterruptList struct {
	Interrupts []Interrupt `json:"interrupts"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// Resumed answers a successful resume.
type Resumed struct {
	InterruptID string          `json:"interrupt_id"`
	Status      InterruptStatus `json:"status"`
	// Signed lists the signatures a policy-covered interrupt has so far;
	// while it is pending (202) more are needed (interrupt_raised's
	// approval says how many).
	Signed []SignedBy `json:"signed,omitempty"`
}

// SteerAccepted answers POST /api/v1/runs/{id}/steer.
type SteerAccepted struct {
	SteeringID string `json:"steering_id"`
	RunID      RunID  `json:"run_id"`
}

// HTTP headers of cluster mode (package cluster, docs/cluster.md).
const (
	// OwnerHeader names the cluster node that owns a request's session,
	// on a 421 not_owner answer.
	OwnerHeader = "Conclave-Owner"
	// ForwardedHeader marks a request one node forwarded to another (its
	// value is the forwarding node's id): it is never forwarded again.
	ForwardedHeader = "Conclave-Forwarded"
)
