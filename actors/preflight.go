package actors

import (
	"context"
	"errors"

	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
)

// Billing pre-flight (Config.Billing): the run's start is checked on the
// caller's goroutine, each model turn in its turn goroutine before the
// model is called. Neither blocks an actor's mailbox.

// QuotaTenantSuspended: the billing pre-flight check says the tenant is
// suspended (HTTP 402).
const QuotaTenantSuspended QuotaCode = "tenant_suspended"

// preflightRun asks the billing hook whether spec's run may start. A
// denial is a *QuotaError with the denial's code.
func (e *Engine) preflightRun(ctx context.Context, spec *runSpec) error {
	r := billing.Request{Stage: billing.StageRun, Tenant: spec.tenant, RunID: spec.runID}
	if b := spec.budget; b != nil {
		r.EstimatedTokens = b.Tokens
		if b.CostUSD > 0 {
			r.EstimatedUSD = &b.CostUSD
		}
	}
	err := e.cfg.Billing.Check(ctx, r)
	var d *billing.Denied
	if !errors.As(err, &d) {
		return err
	}
	code := QuotaInsufficientBudget
	if d.Code == messages.ErrCodeTenantSuspended {
		code = QuotaTenantSuspended
	}
	return &QuotaError{Code: code, Tenant: spec.tenant, Message: d.Reason}
}

// turnPreflight is the check a turn makes before it calls the model: the
// tenant's day budget of the quota file (tokens_per_day, cost_per_day:
// once spent, the turn is denied as a new run is refused, instead of
// spending more and ending with budget_exceeded after it), then the
// billing hook. nil when the tenant has neither.
func (e *Engine) turnPreflight(run *runSpec, agentID string) func(context.Context) error {
	day := !dayLimit(e.limits(run.tenant)).None()
	if e.cfg.Billing == nil && !day {
		return nil
	}
	return func(ctx context.Context) error {
		err := e.checkTurn(ctx, run, agentID, day)
		var d *billing.Denied
		if errors.As(err, &d) {
			// The run ends with the denial's code, whichever agent was
			// denied (the director's or a synthesiser's lane would
			// otherwise end the run with its own code).
			run.out.exceeded(&messages.StopRun{Code: d.Code, Reason: d.Reason})
		}
		return err
	}
}

// checkTurn is turnPreflight's check.
func (e *Engine) checkTurn(ctx context.Context, run *runSpec, agentID string, day bool) error {
	if day {
		var qe *QuotaError
		if err := e.admitSpend(run.tenant, e.limits(run.tenant)); errors.As(err, &qe) {
			return &billing.Denied{Stage: billing.StageTurn, Code: messages.ErrCodeInsufficientBudget, Reason: qe.Message}
		}
	}
	if e.cfg.Billing == nil {
		return nil
	}
	r := billing.Request{Stage: billing.StageTurn, Tenant: run.tenant, RunID: run.runID, Agent: agentID, Model: run.model.Name()}
	if m := run.out.meter; m != nil {
		s := m.Spent()
		r.SpentTokens = s.Tokens
		if s.Unpriced == "" {
			usd := s.Cost.Dollars()
			r.SpentUSD = &usd
		}
	}
	return e.cfg.Billing.Check(ctx, r)
}
