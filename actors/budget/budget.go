// Package budget holds model spend to budgets: a run's (Meter) and a
// tenant's per UTC day (Ledger). Spend is counted from token_usage events:
// their tokens, and their cost at the model price table (model/pricing).
//
// A model without a price has an unknown cost, never a cost of zero: its
// tokens count, its cost does not, and a cost budget that must hold it is
// over at once (Check), since nothing says the spend is below it.
package budget

import (
	"fmt"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
)

// Spend is model spend: tokens (input and output) and their cost.
type Spend struct {
	Tokens int64
	Cost   pricing.NanoUSD
	// Unpriced names a model without a price whose tokens are counted
	// here: Cost leaves them out ("" when every model had a price).
	Unpriced string
}

// Add returns s + o (the first unpriced model named).
func (s Spend) Add(o Spend) Spend {
	s.Tokens += o.Tokens
	s.Cost += o.Cost
	if s.Unpriced == "" {
		s.Unpriced = o.Unpriced
	}
	return s
}

// Of is the spend of one model turn's usage u on model at prices.
func Of(prices *pricing.Table, model string, u messages.Usage) Spend {
	s := Spend{Tokens: u.InputTokens + u.OutputTokens}
	c, err := prices.Cost(model, u)
	if err != nil {
		s.Unpriced = model
		return s
	}
	s.Cost = c
	return s
}

// Limit is a budget of tokens and of cost; a zero field is no budget.
// TokensName and CostName say where each comes from in messages
// ("tokens_per_run", "the run's budget.cost_usd").
type Limit struct {
	Tokens     int64
	Cost       pricing.NanoUSD
	TokensName string
	CostName   string
}

// None reports whether l limits nothing.
func (l Limit) None() bool { return l.Tokens <= 0 && l.Cost <= 0 }

// NearPercent is how much of a budget is spent when a warning says it is
// near (as turn_limit_near at 80 % of an agent's turns).
const NearPercent = 80

// State is where spend stands against a Limit.
type State int

const (
	Under State = iota // below NearPercent of every budget
	Near               // at NearPercent or more of a budget, over none
	Over               // past a budget, or a cost budget with an unknown cost
)

// Check says where s stands against l, and why (empty for Under), in
// words for a warning or a run_error. who names the spender ("the run",
// "tenant acme today").
func (l Limit) Check(who string, s Spend) (State, string) {
	switch {
	case l.Tokens > 0 && s.Tokens > l.Tokens:
		return Over, fmt.Sprintf("%s used %d tokens, more than its budget of %d (%s)", who, s.Tokens, l.Tokens, l.TokensName)
	case l.Cost > 0 && s.Unpriced != "":
		return Over, fmt.Sprintf("%s used model %q, which has no price (add it to --prices): its cost is unknown, so its cost budget of %v (%s) cannot be held", who, s.Unpriced, l.Cost, l.CostName)
	case l.Cost > 0 && s.Cost > l.Cost:
		return Over, fmt.Sprintf("%s spent an estimated %v, more than its budget of %v (%s)", who, s.Cost, l.Cost, l.CostName)
	case l.Tokens > 0 && s.Tokens*100 >= l.Tokens*NearPercent:
		return Near, fmt.Sprintf("%s used %d tokens of its budget of %d (%s)", who, s.Tokens, l.Tokens, l.TokensName)
	case l.Cost > 0 && float64(s.Cost)*100 >= float64(l.Cost)*NearPercent:
		return Near, fmt.Sprintf("%s spent an estimated %v of its budget of %v (%s)", who, s.Cost, l.Cost, l.CostName)
	}
	return Under, ""
}

// Exhausted reports whether s leaves nothing of l: a run started now
// could not spend anything (admission of a tenant's day).
func (l Limit) Exhausted(s Spend) bool {
	return l.Tokens > 0 && s.Tokens >= l.Tokens || l.Cost > 0 && (s.Cost >= l.Cost || s.Unpriced != "")
}
