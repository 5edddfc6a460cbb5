package messages

import (
	"encoding/json"
	"strings"
)

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
	// ApprovalTimeoutSeconds bounds how long an interrupt of this run waits
	// for a human (default: the server's, 600 s).
	ApprovalTimeoutSeconds int `json:"approval_timeout_seconds,omitempty"`
	// ApprovalTimeoutAction is what an expired approval decides: reject
	// (the default) or approve. Expired info requests get an empty response.
	ApprovalTimeoutAction Decision `json:"approval_timeout_action,omitempty"`
	// Advisor, when set, has an advisor check every worker's terminating
	// turn (continue, redirect or halt).
	Advisor *AdvisorOptions `json:"advisor,omitempty"`
	// MaxDelegationRounds is the delegation soft cap (default 3): a
	// delegation chain of this length gets a warning, one of twice this
	// length fails the delegating agent with a delegation_limit error.
	MaxDelegationRounds int `json:"max_delegation_rounds,omitempty"`
	// MaxReplans is how many times the director plans again after a human
	// rejects its plan, with the rejection's feedback (default 2; 0: a
	// rejected plan ends the run with run_error plan_rejected).
	MaxReplans *int `json:"max_replans,omitempty"`
	// Budget caps the run's model tokens and estimated cost, below the
	// tenant's per-run quotas (RunBudget).
	Budget *RunBudget `json:"budget,omitempty"`
	// Files are files the run starts with (at most MaxFiles, MaxFileBytes
	// each, MaxRunFilesBytes in all): its agents see them (text in their
	// context, images and PDFs as model content parts).
	Files []InputFile `json:"files,omitempty"`
	// Supervision chooses per role how the run's agents are supervised
	// (one-for-one, all-for-one or stop, restart limit, window, backoff),
	// over the server's defaults.
	Supervision *Supervision `json:"supervision,omitempty"`
	// RequestID names the request that started the run; set by the
	// transport (RunIdentity). At most MaxRequestIDBytes printable ASCII.
	RequestID string `json:"-"`
	// TraceParent is the W3C traceparent header of the request that
	// started the run, set by the transport; the run's trace continues it.
	// An invalid one is ignored, as the W3C recommendation says.
	TraceParent string `json:"-"`
}

// ValidTraceparent reports whether s is a W3C traceparent this server
// continues: "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" in
// lowercase, neither id all zeros (a later version's value is read by its
// version-00 prefix, as the recommendation says).
func ValidTraceparent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && s[55] != '-') || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	if !lowerHex(s[0:2]) || s[0:2] == "ff" || (s[0:2] == "00" && len(s) != 55) {
		return false
	}
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return false
	}
	return strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// MaxRequestIDBytes bounds StartRun.RequestID.
const MaxRequestIDBytes = 128

// ValidRequestID reports whether s may name a request: 1..128 printable
// ASCII characters without spaces.
func ValidRequestID(s string) bool {
	if s == "" || len(s) > MaxRequestIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// AdvisorMode is how a run's advisor works with the workers.
type AdvisorMode string

// Advisor modes.
const (
	// AdvisorModeGate (the default): the advisor checks every worker's
	// terminating turn (continue, redirect or halt).
	AdvisorModeGate AdvisorMode = "gate"
	// AdvisorModeConsult: workers ask the advisor for advice mid-run with
	// the consult_advisor tool, at most max_consults times each; the
	// advice is the call's result. Terminating turns are not checked.
	AdvisorModeConsult AdvisorMode = "consult"
)

// AdvisorOptions configure the advisor of a run.
type AdvisorOptions struct {
	// Mode is gate (default) or consult.
	Mode AdvisorMode `json:"mode,omitempty"`
	// MaxConsults is the consult budget per agent in consult mode
	// (default 2); a call beyond it is an error result saying so.
	MaxConsults int `json:"max_consults,omitempty"`
	// MaxRedirects is the redirect budget per agent (default 2); one more
	// redirect is a gate_budget halt.
	MaxRedirects int `json:"max_redirects,omitempty"`
	// MalformedContinues lets an unparsable advisor answer through as
	// continue; by default it halts (fail closed).
	MalformedContinues bool `json:"malformed_continues,omitempty"`
}

// Delegation and advisor defaults.
const (
	DefaultMaxDelegationRounds = 3
	MaxMaxDelegationRounds     = 32
	DefaultMaxReplans          = 2
	MaxMaxReplans              = 10
	DefaultAdvisorRedirects    = 2
	MaxAdvisorRedirects        = 16
	DefaultAdvisorConsults     = 2
	MaxAdvisorConsults         = 16
)

// MaxApprovalTimeoutSeconds bounds StartRun.ApprovalTimeoutSeconds (7 days).
const MaxApprovalTimeoutSeconds = 7 * 24 * 3600

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

// Steer posts a steering note (or a graph diff) to a live run; it is
// applied at the run's next wave boundary.
type Steer struct {
	Tenant TenantID `json:"-"`
	RunID  RunID    `json:"-"` // from the URL
	SteerNote
}

// MaxSteerNoteBytes bounds Steer.Note.
const MaxSteerNoteBytes = 16 << 10

// Resume answers an interrupt. Which fields it needs depends on the
// interrupt's kind (see docs/api.md):
//
//   - tool_approval: decision approve | reject | revise; revise needs
//     edited_args (the full replacement arguments); feedback optional.
//   - info_request: response.
//   - plan_approval: decision approve | reject | revise; revise needs plan;
//     reason optional.
//   - node_approval, spawn_approval: decision approve | reject; feedback optional.
type Resume struct {
	Tenant      TenantID        `json:"-"`
	InterruptID string          `json:"-"` // from the URL
	Decision    Decision        `json:"decision,omitempty"`
	Feedback    string          `json:"feedback,omitempty"`
	Response    string          `json:"response,omitempty"`
	EditedArgs  json.RawMessage `json:"edited_args,omitempty"`
	// Choices answer a choice: the chosen option ids.
	Choices []string `json:"choices,omitempty"`
	Plan    *Plan    `json:"plan,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Signature signs the decision of a policy-covered interrupt: the
	// statement {interrupt_id, evidence_digest, decision, edited_args}
	// (see docs/governance.md). One resume carries one approver's.
	Signature *ResumeSignature `json:"signature,omitempty"`
}

// ResumeSignature is an approver's signature in a resume.
type ResumeSignature struct {
	Approver  string `json:"approver"`
	Signature []byte `json:"signature"` // base64 in JSON
}

// Rewind re-runs an ended run from a wave, as a new run in the same
// session: waves before Wave reuse the source run's outputs; Note steers
// the waves that run again.
type Rewind struct {
	Tenant TenantID `json:"-"`
	RunID  RunID    `json:"-"` // from the URL
	Wave   int      `json:"wave"`
	Note   string   `json:"note,omitempty"`
}
