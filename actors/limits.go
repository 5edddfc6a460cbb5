package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Limits are one tenant's quotas: what a single caller may cost the
// server. Zero fields take the defaults below; a negative field means no
// limit (for operators who admit every request and accept the risk).
type Limits struct {
	// ConcurrentRuns caps the tenant's runs that have not ended. Over it,
	// StartRun fails with a QuotaError{Code: QuotaTooManyRuns}.
	ConcurrentRuns int `json:"concurrent_runs,omitempty"`
	// RunsPerSecond is the sustained rate of run creation (a token
	// bucket); RunBurst is how many may be created at once above it.
	// Over it: QuotaError{Code: QuotaRateLimited} with RetryAfter.
	RunsPerSecond float64 `json:"runs_per_second,omitempty"`
	RunBurst      int     `json:"run_burst,omitempty"`
	// EventsPerRun is a run's event budget. A scenario whose estimate is
	// larger is refused at once (QuotaScenarioTooLarge); a run that
	// publishes more anyway ends with run_error{code:"budget_exceeded"}.
	EventsPerRun int64 `json:"events_per_run,omitempty"`
	// TokensPerRun is a run's token budget: its model turns' input and
	// output tokens (token_usage) added up. The first report past it ends
	// the run with run_error{code:"budget_exceeded"}: its agents stop
	// cleanly, within the turn that crossed it. 0 (the default): none.
	TokensPerRun int64 `json:"tokens_per_run,omitempty"`
	// CostPerRun is a run's cost budget in US dollars: its token_usage
	// priced at Config.Prices. Past it the run ends likewise; at 80 % of
	// this or TokensPerRun its run lane gets a warning budget_near. A
	// model without a price makes its cost unknown, which a cost budget
	// refuses (the run ends budget_exceeded saying so; conclave serve
	// refuses to start instead when a configured model has no price).
	// 0: none.
	CostPerRun float64 `json:"cost_per_run,omitempty"`
	// TokensPerDay and CostPerDay are the tenant's budgets per UTC day,
	// over all its runs (token_usage events counted as they are
	// published, rebuilt from the journal after a restart). A run started
	// when either is spent is refused (QuotaInsufficientBudget); a
	// running run whose turn crosses one ends with budget_exceeded. 0:
	// none.
	TokensPerDay int64   `json:"tokens_per_day,omitempty"`
	CostPerDay   float64 `json:"cost_per_day,omitempty"`
}

// Default limits: generous for one person's councils, small enough that
// one tenant cannot exhaust a 2-core, few-GB server.
const (
	DefaultConcurrentRuns = 32
	DefaultRunsPerSecond  = 10
	DefaultRunBurst       = 50
	DefaultEventsPerRun   = 1_000_000
)

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.ConcurrentRuns == 0 {
		l.ConcurrentRuns = DefaultConcurrentRuns
	}
	if l.RunsPerSecond == 0 {
		l.RunsPerSecond = DefaultRunsPerSecond
	}
	if l.RunBurst == 0 {
		l.RunBurst = DefaultRunBurst
	}
	if l.EventsPerRun == 0 {
		l.EventsPerRun = DefaultEventsPerRun
	}
	return l
}

// QuotaCode says which quota refused a request. The values are the error
// codes of the HTTP API (docs/api.md).
type QuotaCode string

const (
	// QuotaTooManyRuns: the tenant has ConcurrentRuns runs that have not
	// ended; retry once one ends (HTTP 429 with Retry-After).
	QuotaTooManyRuns QuotaCode = "too_many_runs"
	// QuotaRateLimited: runs are created faster than RunsPerSecond allows
	// (HTTP 429 with Retry-After).
	QuotaRateLimited QuotaCode = "rate_limited"
	// QuotaScenarioTooLarge: the run can never fit its event budget
	// (HTTP 422); retrying does not help.
	QuotaScenarioTooLarge QuotaCode = "scenario_too_large"
	// QuotaInsufficientBudget: the tenant has spent its tokens_per_day or
	// cost_per_day today (HTTP 429, Retry-After: until UTC midnight).
	QuotaInsufficientBudget QuotaCode = "insufficient_budget"
	// QuotaBudgetTooLarge: the run asks for a budget larger than the
	// tenant's tokens_per_run or cost_per_run (HTTP 422).
	QuotaBudgetTooLarge QuotaCode = "budget_too_large"
)

// ErrQuota matches every *QuotaError (errors.Is).
var ErrQuota = errors.New("actors: quota exceeded")

// QuotaError is a request refused by a tenant's Limits.
type QuotaError struct {
	Code    QuotaCode
	Tenant  messages.TenantID
	Message string
	// RetryAfter is when retrying may succeed (0 for QuotaScenarioTooLarge).
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("actors: %s: %s", e.Code, e.Message)
}

// Permanent reports whether retrying the same request can never succeed
// (HTTP 422 rather than 429): the request itself asks too much.
func (e *QuotaError) Permanent() bool {
	return e.Code == QuotaScenarioTooLarge || e.Code == QuotaBudgetTooLarge
}

// Is makes errors.Is(err, ErrQuota) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }
