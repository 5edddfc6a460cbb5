package messages

import "math"

// RunBudget is a run's spend budget: model tokens (input and output, as
// token_usage reports them) and estimated cost in US dollars (at the
// server's model price table). A zero field is no budget of its own.
//
// In POST /api/v1/runs it asks for a budget (StartRun.Budget): each field
// must be at most the tenant's tokens_per_run and cost_per_run (422
// budget_too_large above), and an absent field takes the tenant's. In
// run_started it is the budget the run got (RunStartedPayload.Budget),
// which a run resumed after a restart keeps.
type RunBudget struct {
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// MaxBudgetCostUSD bounds RunBudget.CostUSD (the largest amount the
// engine's nano-dollar counters hold with room to spare).
const MaxBudgetCostUSD = 1e9

// validate checks b's fields (the JSON names under budget.).
func (b *RunBudget) validate() *FieldError {
	switch {
	case b.Tokens < 0:
		return &FieldError{Field: "budget.tokens", Problem: "must be 0 (the tenant's) or more"}
	case math.IsNaN(b.CostUSD) || b.CostUSD < 0 || b.CostUSD > MaxBudgetCostUSD:
		return &FieldError{Field: "budget.cost_usd", Problem: "must be 0 (the tenant's) or more, at most 1e9"}
	}
	return nil
}
