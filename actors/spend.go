package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/conclave-ai/conclave/actors/budget"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
)

// Model spend: a run's budget (its request's, else its tenant's
// tokens_per_run and cost_per_run), and every tenant's day
// (tokens_per_day, cost_per_day). The counting is package budget's; the
// outbox feeds it every token_usage the run publishes.

// runBudget is the budget a run gets: what it asked for, each field at
// most the tenant's (a QuotaError QuotaBudgetTooLarge above), and the
// tenant's for what it did not ask. nil: no budget.
func runBudget(tenant messages.TenantID, l Limits, asked *messages.RunBudget) (*messages.RunBudget, error) {
	b := messages.RunBudget{Tokens: max(l.TokensPerRun, 0), CostUSD: max(l.CostPerRun, 0)}
	if asked != nil {
		if asked.Tokens > 0 {
			if b.Tokens > 0 && asked.Tokens > b.Tokens {
				return nil, &QuotaError{Code: QuotaBudgetTooLarge, Tenant: tenant,
					Message: fmt.Sprintf("budget.tokens %d is more than the tenant's tokens_per_run quota of %d", asked.Tokens, b.Tokens)}
			}
			b.Tokens = asked.Tokens
		}
		if asked.CostUSD > 0 {
			if b.CostUSD > 0 && asked.CostUSD > b.CostUSD {
				return nil, &QuotaError{Code: QuotaBudgetTooLarge, Tenant: tenant,
					Message: fmt.Sprintf("budget.cost_usd %g is more than the tenant's cost_per_run quota of %g", asked.CostUSD, b.CostUSD)}
			}
			b.CostUSD = asked.CostUSD
		}
	}
	if b == (messages.RunBudget{}) {
		return nil, nil
	}
	return &b, nil
}

// runLimit is b as a budget.Limit, each field named after where it came
// from: the tenant's quota when it equals it, else the request.
func runLimit(b *messages.RunBudget, l Limits) budget.Limit {
	if b == nil {
		return budget.Limit{}
	}
	lim := budget.Limit{Tokens: b.Tokens, Cost: pricing.USD(b.CostUSD), TokensName: "budget.tokens", CostName: "budget.cost_usd"}
	if b.Tokens == l.TokensPerRun {
		lim.TokensName = "tokens_per_run"
	}
	if b.CostUSD == l.CostPerRun {
		lim.CostName = "cost_per_run"
	}
	return lim
}

// dayLimit is the tenant's budget per UTC day.
func dayLimit(l Limits) budget.Limit {
	return budget.Limit{Tokens: max(l.TokensPerDay, 0), Cost: pricing.USD(max(l.CostPerDay, 0)),
		TokensName: "tokens_per_day", CostName: "cost_per_day"}
}

// admitSpend refuses a run of a tenant whose day's budget is spent.
func (e *Engine) admitSpend(tenant messages.TenantID, l Limits) error {
	day := dayLimit(l)
	if day.None() {
		return nil
	}
	spent := e.ledger.Spent(tenant)
	if !day.Exhausted(spent) {
		return nil
	}
	_, why := day.Check("tenant "+string(tenant)+" today", spent)
	if why == "" { // exactly at the budget: Check says near, not over
		why = fmt.Sprintf("tenant %s has spent its budget for today (%d tokens, an estimated %v)", tenant, spent.Tokens, spent.Cost)
	}
	return &QuotaError{Code: QuotaInsufficientBudget, Tenant: tenant, RetryAfter: e.ledger.UntilMidnight(),
		Message: why + "; it is reset at midnight UTC"}
}

// newMeter is the spend meter of a run with budget b.
func (e *Engine) newMeter(tenant messages.TenantID, b *messages.RunBudget) *budget.Meter {
	l := e.limits(tenant)
	return budget.NewMeter(budget.MeterConfig{Prices: e.cfg.Prices, Run: runLimit(b, l), Tenant: tenant, Ledger: e.ledger, Day: dayLimit(l)})
}

// TenantSpend is tenant's model spend of the current UTC day.
func (e *Engine) TenantSpend(tenant messages.TenantID) budget.Spend {
	return e.ledger.Spent(tenantOr(tenant))
}

// restoreDay rebuilds the tenants' spend of the current UTC day from the
// token_usage events the journal holds: what a kill -9 leaves is what was
// journaled, so nothing journaled is forgotten and nothing counted twice.
// It reads the runs of the catalogue that may have spent today (not ended,
// or ended today, or whose stored summary is missing) and, of each, only
// the run_started and token_usage events it decodes.
func (e *Engine) restoreDay(ctx context.Context) error {
	today := budget.DayOf(e.cfg.Now())
	for after := messages.RunID(""); ; {
		runs, next, err := e.catalog.ListRuns(ctx, "", after, journal.MaxListRuns)
		if err != nil {
			return err
		}
		for _, info := range runs {
			if info.LastSeq != 0 && len(info.Summary) > 0 {
				var st storedRun
				if json.Unmarshal(info.Summary, &st) == nil && st.Summary.EndedAt != nil && st.Summary.EndedAt.Before(today) {
					continue
				}
			}
			if err := e.restoreRunSpend(ctx, info, today); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		after = next
	}
}

// restoreRunSpend adds one run's token_usage of today to the ledger.
func (e *Engine) restoreRunSpend(ctx context.Context, info journal.RunInfo, today time.Time) error {
	tenant := messages.LocalTenant
	if k, ok := sessKeyOf(info.Session); ok {
		tenant = k.tenant
	}
	for after := max(info.FirstSeq, 1) - 1; ; {
		batch, err := e.cfg.Journal.ReadAfter(ctx, info.Session, after, 4096)
		if err != nil {
			return fmt.Errorf("read session %s: %w", info.Session, err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, enc := range batch {
			if info.LastSeq != 0 && enc.Seq > info.LastSeq {
				return nil
			}
			if enc.RunID != info.Run || (enc.Type != messages.TokenUsage && enc.Type != messages.RunStarted) {
				continue
			}
			env, err := enc.Envelope()
			if err != nil {
				return fmt.Errorf("session %s seq %d: %w", info.Session, enc.Seq, err)
			}
			switch p := env.Payload.(type) {
			case *messages.RunStartedPayload:
				if p.Tenant != "" {
					tenant = p.Tenant
				}
			case *messages.TokenUsagePayload:
				if !env.Timestamp.Before(today) {
					e.ledger.Restore(tenant, env.Timestamp, budget.Of(e.cfg.Prices, p.Model, p.Usage))
				}
			}
		}
		after = batch[len(batch)-1].Seq
	}
}
