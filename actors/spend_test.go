package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
	"github.com/conclave-ai/conclave/testkit"
)

// scriptedPrices prices the scripted model at $1,000 per million tokens
// in and out: a token costs a tenth of a cent.
func scriptedPrices(t *testing.T) *pricing.Table {
	t.Helper()
	tab, err := pricing.New(map[string]pricing.Price{"scripted": {Input: 1000, Output: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// usd is what n tokens of the scripted model cost at scriptedPrices.
func usd(n int64) float64 { return float64(n) / 1000 }

// warnings returns the messages of the run's warnings of code c.
func warnings(events []*messages.Envelope, c messages.WarningCode) []string {
	var out []string
	for _, env := range events {
		if w, ok := env.Payload.(*messages.WarningPayload); ok && w.Code == c {
			out = append(out, w.Message)
		}
	}
	return out
}

// firstOf is the first payload of type T among events.
func firstOf[T messages.Payload](t *testing.T, events []*messages.Envelope) T {
	t.Helper()
	for _, env := range events {
		if p, ok := env.Payload.(T); ok {
			return p
		}
	}
	t.Fatalf("no %T among %d events", *new(T), len(events))
	return *new(T)
}

// budgetSc is a council small enough for a quick test and large enough
// that a quarter of its tokens is crossed in its middle.
var budgetSc = messages.Scenario{Nodes: 6, Waves: 3, Tokens: 40}

// wholeCouncil is the tokens budgetSc's council uses without a budget.
func wholeCouncil(t *testing.T) int64 {
	t.Helper()
	_, all := testkit.RunCouncil(t, testkit.NewEngine(t, actors.Config{}), messages.StartRun{Question: "q", Scenario: &budgetSc})
	return usageOf(all)
}

// TestEngine_CostBudgetEndsTheRun: a run whose model turns cost more than
// Limits.CostPerRun (at Config.Prices) ends with budget_exceeded naming
// cost_per_run, after one budget_near warning, within the turn that
// crossed it.
func TestEngine_CostBudgetEndsTheRun(t *testing.T) {
	t.Parallel()
	whole := wholeCouncil(t)
	limit := usd(whole * 6 / 10) // the council crosses 80 % of it (near) a turn before it crosses it
	e := testkit.NewEngine(t, actors.Config{Prices: scriptedPrices(t),
		Limits: func(messages.TenantID) actors.Limits { return actors.Limits{CostPerRun: limit} }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &budgetSc})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, "cost_per_run") {
		t.Fatalf("run_error = %+v, want budget_exceeded for cost_per_run", runErr)
	}
	if spent := spentOf(events); spent != usd(usageOf(events)) && (spent-usd(usageOf(events)) > 1e-9 || usd(usageOf(events))-spent > 1e-9) {
		t.Fatalf("the token_usage events say $%g, their tokens cost $%g", spent, usd(usageOf(events)))
	}
	if spent := usd(usageOf(events)); spent <= limit || spent >= usd(whole) {
		t.Fatalf("the run spent $%g with a budget of $%g (the whole council: $%g)", spent, limit, usd(whole))
	}
	if near := warnings(events, messages.WarnBudgetNear); len(near) != 1 || !strings.Contains(near[0], "cost_per_run") {
		t.Fatalf("budget_near warnings: %q, want one for cost_per_run", near)
	}
	if st := firstOf[*messages.RunStartedPayload](t, events); st.Budget == nil || st.Budget.CostUSD != limit {
		t.Fatalf("run_started budget = %+v, want cost_usd %g", st.Budget, limit)
	}
	// The runs API shows the spend and the budget; each token_usage its cost.
	sum, err := e.Run("", ref.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.CostUSD == nil || *sum.CostUSD < spentOf(events)-1e-9 || *sum.CostUSD > spentOf(events)+1e-9 || sum.Budget == nil || sum.Budget.CostUSD != limit {
		t.Fatalf("run summary: cost %v budget %+v, want $%g of $%g", sum.CostUSD, sum.Budget, spentOf(events), limit)
	}
}

// spentOf adds up the cost_usd of the token_usage events; every one must
// have it (the model is priced).
func spentOf(events []*messages.Envelope) float64 {
	var usd float64
	for _, env := range events {
		if u, ok := env.Payload.(*messages.TokenUsagePayload); ok {
			if u.CostUSD == nil {
				return -1
			}
			usd += *u.CostUSD
		}
	}
	return usd
}

// TestEngine_CostBudgetWithAnUnpricedModel: a cost budget cannot be held
// for a model without a price: the run ends at its first token_usage,
// saying which model, instead of counting it as free.
func TestEngine_CostBudgetWithAnUnpricedModel(t *testing.T) {
	t.Parallel()
	none, _ := pricing.New(nil)
	e := testkit.NewEngine(t, actors.Config{Prices: none,
		Limits: func(messages.TenantID) actors.Limits { return actors.Limits{CostPerRun: 100} }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &budgetSc})
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, `"scripted", which has no price`) {
		t.Fatalf("run_error = %+v, want budget_exceeded naming the unpriced model", runErr)
	}
	if n := testkit.Count(events, messages.TokenUsage); n > 2 {
		t.Fatalf("%d token_usage events: the run went on after its first unpriced turn", n)
	}
}

// TestEngine_RunBudgetFromTheRequest: StartRun.Budget is capped by the
// tenant's per-run quota (QuotaBudgetTooLarge above), is echoed in
// run_started, and ends the run like the quota.
func TestEngine_RunBudgetFromTheRequest(t *testing.T) {
	t.Parallel()
	whole := wholeCouncil(t)
	e := testkit.NewEngine(t, actors.Config{Prices: scriptedPrices(t),
		Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerRun: whole / 2, CostPerRun: 1000} }})
	_, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Budget: &messages.RunBudget{Tokens: whole}})
	var q *actors.QuotaError
	if !errors.As(err, &q) || q.Code != actors.QuotaBudgetTooLarge || !q.Permanent() || !strings.Contains(q.Message, "tokens_per_run") {
		t.Fatalf("a budget above the tenant's: %v, want budget_too_large", err)
	}
	_, err = e.StartRun(context.Background(), messages.StartRun{Question: "q", Budget: &messages.RunBudget{CostUSD: 1001}})
	if !errors.As(err, &q) || q.Code != actors.QuotaBudgetTooLarge || !strings.Contains(q.Message, "cost_per_run") {
		t.Fatalf("a cost budget above the tenant's: %v, want budget_too_large", err)
	}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &budgetSc, Budget: &messages.RunBudget{Tokens: whole / 4}})
	if st := firstOf[*messages.RunStartedPayload](t, events); st.Budget == nil || *st.Budget != (messages.RunBudget{Tokens: whole / 4, CostUSD: 1000}) {
		t.Fatalf("run_started budget = %+v, want the request's tokens and the tenant's cost", st.Budget)
	}
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, "budget.tokens") {
		t.Fatalf("run_error = %+v, want budget_exceeded for budget.tokens", runErr)
	}
	if used := usageOf(events); used >= whole/2 {
		t.Fatalf("the run used %d tokens: its own budget of %d was not held", used, whole/4)
	}
}

// clock is a settable clock for Config.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func insufficient(err error) *actors.QuotaError {
	var q *actors.QuotaError
	if errors.As(err, &q) && q.Code == actors.QuotaInsufficientBudget {
		return q
	}
	return nil
}

// TestEngine_TenantDayBudget: a tenant's runs share its tokens_per_day;
// the run that crosses it ends with budget_exceeded, the next start is
// refused with insufficient_budget until UTC midnight, and another
// tenant is not concerned.
func TestEngine_TenantDayBudget(t *testing.T) {
	t.Parallel()
	whole := wholeCouncil(t)
	clk := newClock(time.Date(2026, 3, 4, 22, 0, 0, 0, time.UTC))
	e := testkit.NewEngine(t, actors.Config{Now: clk.Now, RestartBackoff: -1,
		Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerDay: whole / 2} }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &budgetSc})
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, "tokens_per_day") {
		t.Fatalf("run_error = %+v, want budget_exceeded for tokens_per_day", runErr)
	}
	_, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Scenario: &budgetSc})
	q := insufficient(err)
	if q == nil || q.RetryAfter != 2*time.Hour || q.Permanent() {
		t.Fatalf("a start over the day's budget: %v, want insufficient_budget retryable in 2h", err)
	}
	if spent := e.TenantSpend(""); spent.Tokens != usageOf(events) {
		t.Fatalf("the tenant's day: %+v, want the run's %d tokens", spent, usageOf(events))
	}
	_, events = testkit.RunCouncil(t, e, messages.StartRun{Tenant: "other", Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 5}})
	if testkit.Terminal(events, events[0].RunID).Type != messages.RunFinished {
		t.Fatal("another tenant's run did not finish")
	}
	clk.Add(2 * time.Hour) // midnight UTC
	if _, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 5}}); err != nil {
		t.Fatalf("the next day: %v", err)
	}
}

// TestEngine_TenantDaySurvivesARestart: a tenant's spend of the day is
// rebuilt from the journal when the engine starts again (as after a kill
// -9: nothing but the journal is kept), and a new day starts from zero.
func TestEngine_TenantDaySurvivesARestart(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC))
	r := newRestartable(t)
	r.cfg.Now = clk.Now
	r.restart()
	ctx := context.Background()
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", Scenario: &messages.Scenario{Nodes: 2, Tokens: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.Follow(ctx, r.e, ref, 0); err != nil {
		t.Fatal(err)
	}
	used := usageOf(r.all("s"))
	r.cfg.Limits = func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerDay: used} }
	r.restart()
	if got := r.e.TenantSpend(""); got.Tokens != used {
		t.Fatalf("after the restart the day holds %d tokens, want %d (rebuilt from the journal)", got.Tokens, used)
	}
	if _, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s2"}); insufficient(err) == nil {
		t.Fatalf("a start after the restart: %v, want insufficient_budget", err)
	}
	clk.Add(12 * time.Hour)
	r.restart()
	if got := r.e.TenantSpend(""); got.Tokens != 0 {
		t.Fatalf("the next day holds %d tokens of yesterday", got.Tokens)
	}
}

// TestEngine_CostBudgetSurvivesARestart: the cost a run spent before a
// restart counts against its cost budget after it (its usage per model is
// rebuilt from the journal and priced again).
func TestEngine_CostBudgetSurvivesARestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.cfg.Prices = scriptedPrices(t)
	r.restart()
	ctx := context.Background()
	ref := parkOnToolApproval(t, r)
	used := usageOf(r.all("s"))
	// The run_started of this run recorded no budget: it takes the
	// tenant's quota of now.
	r.cfg.Limits = func(messages.TenantID) actors.Limits { return actors.Limits{CostPerRun: usd(used + 1)} }
	r.restart()
	p, err := testkit.NewProbe(ctx, r.e, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	approveAll(t, r.e)
	if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := r.all("s")
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, "cost_per_run") {
		t.Fatalf("run_error = %+v, want budget_exceeded for cost: the cost before the restart was forgotten", runErr)
	}
	if after := usageOf(events) - used; after > used {
		t.Fatalf("the turns after the restart used %d tokens, more than the %d before: the test cannot tell a reset", after, used)
	}
}

// TestEngine_ModelCosts: the estimated cost of every model turn, by
// model and role (the metric conclave_model_cost_usd_total), adds up to
// the priced usage of the runs; an unpriced model has no entry.
func TestEngine_ModelCosts(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Prices: scriptedPrices(t)})
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &budgetSc})
	var sum float64
	roles := map[string]bool{}
	for _, mc := range e.ModelCosts() {
		if mc.Model != "scripted" {
			t.Errorf("cost of model %q", mc.Model)
		}
		sum += mc.USD
		roles[mc.Role] = true
	}
	if want := usd(usageOf(events)); sum < want-1e-9 || sum > want+1e-9 {
		t.Fatalf("costs add up to $%g, want $%g", sum, want)
	}
	for _, r := range []string{"director", "worker", "synthesizer"} {
		if !roles[r] {
			t.Errorf("no cost for role %s (roles: %v)", r, roles)
		}
	}
	none, _ := pricing.New(nil)
	e = testkit.NewEngine(t, actors.Config{Prices: none})
	testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 5}})
	if got := e.ModelCosts(); len(got) != 0 {
		t.Fatalf("an unpriced model's costs: %+v, want none", got)
	}
}
