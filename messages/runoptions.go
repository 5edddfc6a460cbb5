package messages

import (
	"fmt"
	"time"
)

// StartRun's defaults and validation live here, once: the HTTP API, the
// engine, rewind and recovery (RunStartedPayload.Options) and the CLI all
// turn a request into RunOptions through StartRun.Options, so they accept
// the same requests and say the same thing about the ones they refuse.

// MaxConcurrency bounds StartRun.Concurrency (and the server's default).
const MaxConcurrency = 1024

// RunDefaults are the server's settings for what a StartRun leaves out.
type RunDefaults struct {
	Concurrency     int           // nodes of one wave running at once
	ApprovalTimeout time.Duration // how long an interrupt waits for a human
}

// RunOptions are a run's settings: validated, every default applied.
type RunOptions struct {
	Tenant    TenantID
	SessionID SessionID // empty: a new session, named by the engine
	Question  string
	HITL      HITLMode
	// Scenario has its defaults applied and StartRun.Seed folded in.
	Scenario              Scenario
	Concurrency           int
	ApprovalTimeout       time.Duration
	ApprovalTimeoutAction Decision
	Advisor               *AdvisorOptions
	MaxDelegationRounds   int
	MaxReplans            int
	RequestID             string
	// TraceParent is StartRun.TraceParent when valid (ValidTraceparent),
	// else empty; TraceID the run's trace (RunStartedPayload.TraceID).
	TraceParent string
	TraceID     string
	// Budget is the run's budget as asked (StartRun.Budget), or, for a run
	// resumed after a restart, as it got it (run_started); nil: the
	// tenant's quotas.
	Budget *RunBudget
	// Files are the run's attached files, checked (StartRun.Files), or,
	// for a run rebuilt after a restart or rewound, as run_started
	// recorded them.
	Files []RunFile
	// Supervision is StartRun.Supervision, or, for a run resumed after a
	// restart, what run_started recorded (the server's defaults merged
	// in).
	Supervision *Supervision
}

// FieldError is a StartRun field whose value is refused. Field is its JSON
// name (the CLI names its flag instead); Problem says what is wrong.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Options validates s and applies d and the protocol's defaults. Errors
// are *FieldError, *FileError (Files), or a Scenario.Validate error (which names its fields),
// or an id error (ErrInvalidID).
func (s StartRun) Options(d RunDefaults) (RunOptions, error) {
	bad := func(field, format string, args ...any) (RunOptions, error) {
		return RunOptions{}, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	o := RunOptions{Tenant: s.Tenant, SessionID: s.SessionID, Question: s.Question, Advisor: s.Advisor,
		Concurrency: s.Concurrency, ApprovalTimeout: d.ApprovalTimeout, ApprovalTimeoutAction: s.ApprovalTimeoutAction,
		MaxDelegationRounds: s.MaxDelegationRounds, RequestID: s.RequestID, Budget: s.Budget, Supervision: s.Supervision}
	if err := s.Supervision.Validate(); err != nil {
		return RunOptions{}, err
	}
	if ValidTraceparent(s.TraceParent) {
		o.TraceParent, o.TraceID = s.TraceParent, s.TraceParent[3:35]
	}
	if s.Budget != nil {
		if err := s.Budget.validate(); err != nil {
			return RunOptions{}, err
		}
	}
	var err error
	if o.Files, err = runFiles(s.Files); err != nil {
		return RunOptions{}, err
	}
	if s.RequestID != "" && !ValidRequestID(s.RequestID) {
		return bad("request_id", "must be 1..%d printable ASCII characters without spaces", MaxRequestIDBytes)
	}
	switch {
	case s.Question == "":
		return bad("question", "is required")
	case len(s.Question) > MaxQuestionBytes:
		return bad("question", "is longer than %d bytes", MaxQuestionBytes)
	}
	if o.HITL, err = ParseHITLMode(string(s.HITL)); err != nil {
		return bad("hitl", "must be none, plan, node or tools, got %q", truncate(string(s.HITL), 32))
	}
	if t := s.ApprovalTimeoutSeconds; t != 0 {
		if t < 1 || t > MaxApprovalTimeoutSeconds {
			return bad("approval_timeout_seconds", "must be in 1..%d, got %d", MaxApprovalTimeoutSeconds, t)
		}
		o.ApprovalTimeout = time.Duration(t) * time.Second
	}
	switch o.ApprovalTimeoutAction {
	case "":
		o.ApprovalTimeoutAction = DecisionReject
	case DecisionReject, DecisionApprove:
	default:
		return bad("approval_timeout_action", "must be reject or approve, got %q", truncate(string(s.ApprovalTimeoutAction), 32))
	}
	if o.Tenant == "" {
		o.Tenant = LocalTenant
	} else if _, err := NewTenantID(string(o.Tenant)); err != nil {
		return RunOptions{}, err // a tenant is part of the session's journal key (tenant/session)
	}
	if o.SessionID != "" {
		if _, err := NewSessionID(string(o.SessionID)); err != nil {
			return RunOptions{}, err
		}
	}
	if s.Scenario != nil {
		o.Scenario = *s.Scenario
	}
	if s.Seed != nil {
		o.Scenario.Seed = *s.Seed
	}
	o.Scenario = o.Scenario.WithDefaults()
	if err := o.Scenario.Validate(); err != nil {
		return RunOptions{}, err
	}
	if o.Concurrency == 0 {
		o.Concurrency = d.Concurrency
	}
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return bad("concurrency", "must be in 1..%d, got %d", MaxConcurrency, o.Concurrency)
	}
	if o.MaxDelegationRounds == 0 {
		o.MaxDelegationRounds = DefaultMaxDelegationRounds
	}
	if r := o.MaxDelegationRounds; r < 1 || r > MaxMaxDelegationRounds {
		return bad("max_delegation_rounds", "must be in 1..%d, got %d", MaxMaxDelegationRounds, r)
	}
	o.MaxReplans = DefaultMaxReplans
	if s.MaxReplans != nil {
		o.MaxReplans = *s.MaxReplans
	}
	if r := o.MaxReplans; r < 0 || r > MaxMaxReplans {
		return bad("max_replans", "must be in 0..%d, got %d", MaxMaxReplans, r)
	}
	if a := o.Advisor; a != nil && (a.MaxRedirects < 0 || a.MaxRedirects > MaxAdvisorRedirects) {
		return bad("advisor.max_redirects", "must be in 0..%d, got %d", MaxAdvisorRedirects, a.MaxRedirects)
	}
	if a := o.Advisor; a != nil {
		switch a.Mode {
		case "", AdvisorModeGate, AdvisorModeConsult:
		default:
			return bad("advisor.mode", "must be gate or consult, got %q", truncate(string(a.Mode), 32))
		}
		if a.MaxConsults < 0 || a.MaxConsults > MaxAdvisorConsults {
			return bad("advisor.max_consults", "must be in 0..%d, got %d", MaxAdvisorConsults, a.MaxConsults)
		}
	}
	return o, nil
}

// Options are the settings the run started with, for recovery and rewind:
// what run_started recorded, with d (and the protocol's defaults) for
// what runs of older versions did not record.
func (p *RunStartedPayload) Options(d RunDefaults) RunOptions {
	o := RunOptions{Tenant: p.Tenant, Question: p.Question, HITL: p.HITL, Concurrency: p.Concurrency,
		ApprovalTimeout: time.Duration(p.ApprovalTimeoutSeconds) * time.Second, ApprovalTimeoutAction: p.ApprovalTimeoutAction,
		Advisor: p.Advisor, MaxDelegationRounds: p.MaxDelegationRounds, RequestID: p.RequestID,
		TraceParent: p.TraceParent, TraceID: p.TraceID, Budget: p.Budget, Files: p.Files, Supervision: p.Supervision}
	if p.MaxReplans != nil { // runs of older versions did not re-plan
		o.MaxReplans = *p.MaxReplans
	}
	if p.Scenario != nil {
		o.Scenario = *p.Scenario
	}
	if o.Tenant == "" {
		o.Tenant = LocalTenant
	}
	if o.HITL == "" {
		o.HITL = HITLNone
	}
	if o.Concurrency == 0 {
		o.Concurrency = d.Concurrency
	}
	if o.ApprovalTimeout == 0 {
		o.ApprovalTimeout = d.ApprovalTimeout
	}
	if o.ApprovalTimeoutAction == "" {
		o.ApprovalTimeoutAction = DecisionReject
	}
	if o.MaxDelegationRounds == 0 {
		o.MaxDelegationRounds = DefaultMaxDelegationRounds
	}
	return o
}
