package messages

// Commands are what clients ask of the runtime. They are plain structs sent to
// the engine (and, inside it, to actors).

// StartRun asks for a new council run.
type StartRun struct {
	// Tenant owns the run; set by the transport from the caller's credentials.
	Tenant TenantID `json:"-"`
	// SessionID joins an existing session or names a new one; empty means a new session.
	SessionID SessionID `json:"session_id,omitempty"`
	Question  string    `json:"question"`
	HITL      HITLMode  `json:"hitl,omitempty"`
	Scenario  *Scenario `json:"scenario,omitempty"`
	// Seed overrides Scenario.Seed when set.
	Seed *int64 `json:"seed,omitempty"`
	// Concurrency caps the nodes of one wave running at once (default 8).
	Concurrency int `json:"concurrency,omitempty"`
}

// MaxQuestionBytes bounds StartRun.Question.
const MaxQuestionBytes = 64 << 10

// AbortRun asks a run to stop. The run still ends with exactly one terminal
// event: run_error with code "aborted".
type AbortRun struct {
	Tenant TenantID `json:"-"`
	RunID  RunID    `json:"run_id"`
	Reason string   `json:"reason,omitempty"`
}

// Subscribe attaches a consumer to a session's events after a cursor.
type Subscribe struct {
	Tenant    TenantID  `json:"-"`
	SessionID SessionID `json:"session_id"`
	// After is the last seq the consumer already has (0 = from the start).
	After uint64 `json:"after"`
}

// Steer posts a note to a live run, applied at the next wave boundary.
type Steer struct {
	RunID RunID  `json:"run_id"`
	Note  string `json:"note"`
}

// Resume answers an interrupt.
type Resume struct {
	InterruptID string   `json:"interrupt_id"`
	Decision    Decision `json:"decision,omitempty"`
	Feedback    string   `json:"feedback,omitempty"`
	Response    string   `json:"response,omitempty"`
}
