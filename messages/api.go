package messages

// Bodies of the HTTP API (see docs/api.md). Requests reuse the commands:
// POST /api/v1/runs takes a StartRun.

// RunCreated answers POST /api/v1/runs.
type RunCreated struct {
	RunID     RunID     `json:"run_id"`
	SessionID SessionID `json:"session_id"`
	StreamURL string    `json:"stream_url"`
	WSURL     string    `json:"ws_url"`
}

// RunList answers GET /api/v1/runs.
type RunList struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor is passed as ?cursor= for the next page; empty on the last page.
	NextCursor RunID `json:"next_cursor,omitempty"`
}

// ErrorBody is every API error: {"error":{"code":"...","message":"..."}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError is the body of ErrorBody.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WSClientMessage is a frame a WebSocket client may send.
type WSClientMessage struct {
	// Type is "subscribe".
	Type string `json:"type"`
	// After is the last seq the client has; the stream restarts after it.
	After uint64 `json:"after"`
}

// WSSubscribe is the only WSClientMessage type.
const WSSubscribe = "subscribe"
