package messages

import (
	"fmt"
	"time"
)

// TenantID names the owner of sessions and runs. Another tenant's session,
// run or interrupt does not exist for a caller (not found, never forbidden).
type TenantID string

// LocalTenant owns everything when the server runs without tokens.
const LocalTenant TenantID = "local"

// NewTenantID validates s as a tenant id.
func NewTenantID(s string) (TenantID, error) {
	if !idPattern.MatchString(s) {
		return "", fmt.Errorf("%w: tenant %q must match %s", ErrInvalidID, truncate(s, 64), idPattern)
	}
	return TenantID(s), nil
}

// RunStatus is where a run is in its life.
type RunStatus string

// Run statuses. The last four are terminal.
const (
	StatusPlanning     RunStatus = "planning"
	StatusRunning      RunStatus = "running"
	StatusSynthesizing RunStatus = "synthesizing"
	StatusFinished     RunStatus = "finished"
	StatusFailed       RunStatus = "failed"
	StatusAborted      RunStatus = "aborted"
	StatusInterrupted  RunStatus = "interrupted"
)

// ParseRunStatus validates s.
func ParseRunStatus(s string) (RunStatus, error) {
	switch st := RunStatus(s); st {
	case StatusPlanning, StatusRunning, StatusSynthesizing, StatusFinished, StatusFailed, StatusAborted, StatusInterrupted:
		return st, nil
	}
	return "", fmt.Errorf("messages: run status %q is not one of planning, running, synthesizing, finished, failed, aborted, interrupted", truncate(s, 32))
}

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool {
	return s == StatusFinished || s == StatusFailed || s == StatusAborted || s == StatusInterrupted
}

// RunSummary is the state of a run as the API reports it; it is folded
// from the run's events (see actors/runindex).
type RunSummary struct {
	RunID     RunID      `json:"run_id"`
	SessionID SessionID  `json:"session_id"`
	Question  string     `json:"question"`
	Status    RunStatus  `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Wave is the current (or last) wave, -1 before the first.
	Wave  int        `json:"wave"`
	Waves int        `json:"waves"`
	Nodes NodeCounts `json:"nodes"`
	// Running counts nodes started and not yet ended.
	Running int   `json:"running"`
	Usage   Usage `json:"usage"`
	// CostUSD is the run's estimated cost so far (its token_usage events'
	// cost_usd added up); absent when a model it used has no price.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Budget is the run's spend budget (run_started's); absent: none.
	Budget *RunBudget `json:"budget,omitempty"`
	// LastSeq is the seq of the run's latest event in its session.
	LastSeq uint64 `json:"last_seq"`
	// Outcome: the answer of a finished run, or the error of a failed one.
	Answer    string    `json:"answer,omitempty"`
	ErrorCode ErrorCode `json:"error_code,omitempty"`
	Error     string    `json:"error,omitempty"`
	// TraceID is the run's OpenTelemetry trace id (run_started.trace_id),
	// when it has one.
	TraceID string `json:"trace_id,omitempty"`
}
