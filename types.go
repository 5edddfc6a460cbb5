package conclave

import (
	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// The types of the common path, defined in package messages (wire formats),
// actors (the engine) and journal (storage). These are aliases: a
// conclave.Envelope is a *messages.Envelope, and so on.
type (
	// Tenant owns runs and sessions; handlers get it from their
	// Authenticate hook. Empty means LocalTenant.
	Tenant = messages.TenantID
	// SessionID names a session: a sequence of events (one or more runs)
	// numbered without gaps.
	SessionID = messages.SessionID
	// RunID names a run.
	RunID = messages.RunID
	// RunRef names a started run: tenant, run and session.
	RunRef = actors.RunRef
	// RunRequest asks for a run: the question, and optionally a session to
	// join, a human-in-the-loop mode, the scripted model's Scenario and
	// other options (its fields carry the JSON names of POST /api/v1/runs).
	RunRequest = messages.StartRun
	// Scenario sets the behaviour of the scripted model (README, "Scenarios").
	Scenario = messages.Scenario
	// HITLMode says which gates ask a human: HITLNone, HITLPlan, HITLNode
	// or HITLTools, each including the ones before it.
	HITLMode = messages.HITLMode

	// Envelope is one event: its seq in the session, type, run, agent,
	// lane and typed Payload: a pointer to the payload type of its event
	// type (RunStarted's is *RunStartedPayload, and so on; wire.go
	// re-exports every one, docs/events.md documents them).
	Envelope = messages.Envelope
	// EventType is an event's type, such as RunFinished.
	EventType = messages.EventType

	// Resume answers an interrupt: its InterruptID and a Decision (or a
	// Response, for an info request); see docs/api.md.
	Resume = messages.Resume
	// Decision is the answer to an approval: DecisionApprove,
	// DecisionReject or DecisionRevise.
	Decision = messages.Decision
	// Interrupt is an interrupt and its state.
	Interrupt = messages.Interrupt
	// SteerNote is a steering note, or a graph diff, for a live run.
	SteerNote = messages.SteerNote

	// RunCreated is the answer of POST /api/v1/runs (201): the run, its
	// session, and the URLs of its SSE and WebSocket streams.
	RunCreated = messages.RunCreated
	// RunList is the answer of GET /api/v1/runs: a page of runs and the
	// cursor of the next one.
	RunList = messages.RunList
	// ErrorBody is the body of every API error:
	// {"error":{"code":"…","message":"…"}}.
	ErrorBody = messages.ErrorBody

	// RunSummary is a run's status, counts, usage and outcome.
	RunSummary = messages.RunSummary
	// RunStatus is a run's status, such as "running" or "finished".
	RunStatus = messages.RunStatus
	// RunFilter selects the runs Engine.Runs lists, a page at a time.
	RunFilter = runindex.Filter

	// Limits are one tenant's quotas (Options.Limits).
	Limits = actors.Limits
	// RunBudget is a run's own spend budget (StartRun.Budget).
	RunBudget = messages.RunBudget
	// QuotaError is a run refused by a tenant's quotas.
	QuotaError = actors.QuotaError

	// Journal is the event store (Options.Journal).
	Journal = journal.Journal
	// JournalOptions configure OpenJournal.
	JournalOptions = journal.Options
)

// LocalTenant is the tenant of every caller of a handler whose
// Authenticate is nil, and of requests that name none.
const LocalTenant = messages.LocalTenant

// Human-in-the-loop modes (RunRequest.HITL).
const (
	HITLNone  = messages.HITLNone
	HITLPlan  = messages.HITLPlan
	HITLNode  = messages.HITLNode
	HITLTools = messages.HITLTools
)

// Decisions (Resume.Decision).
const (
	DecisionApprove = messages.DecisionApprove
	DecisionReject  = messages.DecisionReject
	DecisionRevise  = messages.DecisionRevise
)

// Errors of the Engine's methods; check them with errors.Is. They are the
// engine's own sentinels (package actors), not copies.
var (
	ErrShuttingDown      = actors.ErrShuttingDown
	ErrRunNotFound       = actors.ErrRunNotFound
	ErrSessionNotFound   = actors.ErrSessionNotFound
	ErrRunTerminal       = actors.ErrRunTerminal
	ErrRunNotEnded       = actors.ErrRunNotEnded
	ErrInvalidRequest    = actors.ErrInvalidRequest
	ErrInterruptNotFound = actors.ErrInterruptNotFound
	ErrInterruptConflict = actors.ErrInterruptConflict
	ErrInterruptExpired  = actors.ErrInterruptExpired
)

// ParseSupervision reads the command-line form of a Supervision,
// ROLE=STRATEGY[:LIMIT[/WINDOW]][@BACKOFF],... (docs/supervision.md):
// "team=all-for-one,worker=restart:3/10s".
func ParseSupervision(s string) (*Supervision, error) { return messages.ParseSupervision(s) }
