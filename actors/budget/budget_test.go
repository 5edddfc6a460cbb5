package budget_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors/budget"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
)

// prices: "m" costs $1 per million tokens in and out (a token: 1,000 nano-dollars).
func prices(t *testing.T) *pricing.Table {
	t.Helper()
	tab, err := pricing.New(map[string]pricing.Price{"m": {Input: 1, Output: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func use(n int64) messages.Usage { return messages.Usage{InputTokens: n / 2, OutputTokens: n - n/2} }

func TestLimit_Check(t *testing.T) {
	t.Parallel()
	l := budget.Limit{Tokens: 100, Cost: 1000, TokensName: "tokens_per_run", CostName: "cost_per_run"}
	for _, c := range []struct {
		s    budget.Spend
		want budget.State
		in   string
	}{
		{budget.Spend{Tokens: 79, Cost: 10}, budget.Under, ""},
		{budget.Spend{Tokens: 80}, budget.Near, "tokens_per_run"},
		{budget.Spend{Tokens: 10, Cost: 800}, budget.Near, "cost_per_run"},
		{budget.Spend{Tokens: 100, Cost: 1000}, budget.Near, "tokens_per_run"}, // at the budget is not past it
		{budget.Spend{Tokens: 101}, budget.Over, "101 tokens"},
		{budget.Spend{Cost: 1001}, budget.Over, "cost_per_run"},
		{budget.Spend{Tokens: 1, Unpriced: "llama"}, budget.Over, `"llama", which has no price`},
	} {
		got, why := l.Check("the run", c.s)
		if got != c.want || !strings.Contains(why, c.in) {
			t.Errorf("Check(%+v) = %v %q, want %v containing %q", c.s, got, why, c.want, c.in)
		}
	}
	// Without a cost budget an unpriced model is not a reason to stop.
	if got, _ := (budget.Limit{Tokens: 100}).Check("r", budget.Spend{Tokens: 1, Unpriced: "llama"}); got != budget.Under {
		t.Fatalf("a token budget with an unpriced model: %v", got)
	}
}

func TestMeter_AddWarnsOnceThenStopsOnce(t *testing.T) {
	t.Parallel()
	m := budget.NewMeter(budget.MeterConfig{Prices: prices(t), Run: budget.Limit{Cost: pricing.NanoUSD(100 * 1000), CostName: "cost_per_run"}})
	var verdicts []budget.Verdict
	for range 6 {
		verdicts = append(verdicts, m.Add("m", use(20))) // 20 tokens: $0.00002 each time
	}
	// 20, 40, 60: under; 80: near; 100: at the budget; 120: over.
	for i, v := range verdicts {
		switch {
		case i == 3 && v.Near == "", i != 3 && v.Near != "":
			t.Errorf("turn %d: near %q", i, v.Near)
		case i == 5 && !strings.Contains(v.Over, "cost_per_run"), i != 5 && v.Over != "":
			t.Errorf("turn %d: over %q", i, v.Over)
		}
	}
	if v := m.Add("m", use(20)); v.Near != "" || v.Over != "" || v.Spend.Tokens != 20 {
		t.Fatalf("after over: %+v, want nothing more", v)
	}
	if s := m.Spent(); s.Tokens != 140 || s.Cost != 140*1000 {
		t.Fatalf("spent %+v", s)
	}
}

func TestMeter_RestoreCountsThePastSpend(t *testing.T) {
	t.Parallel()
	m := budget.NewMeter(budget.MeterConfig{Prices: prices(t), Run: budget.Limit{Tokens: 100}})
	m.Restore(map[string]messages.Usage{"m": use(90), "other": use(5)})
	if s := m.Spent(); s.Tokens != 95 || s.Cost != 90*1000 || s.Unpriced != "other" {
		t.Fatalf("restored %+v", s)
	}
	if v := m.Add("m", use(10)); v.Over == "" {
		t.Fatalf("95 + 10 of 100: %+v, want over", v)
	}
	// Restored past 80 %: it was warned before; not again.
	m = budget.NewMeter(budget.MeterConfig{Prices: prices(t), Run: budget.Limit{Tokens: 100}})
	m.Restore(map[string]messages.Usage{"m": use(85)})
	if v := m.Add("m", use(5)); v.Near != "" || v.Over != "" {
		t.Fatalf("85 + 5 of 100 after a restore: %+v, want nothing (warned before)", v)
	}
}

// TestMeter_TenantDayAcrossRuns: two runs of a tenant share its day; the
// run whose turn crosses the day's budget is stopped, another tenant is
// not.
func TestMeter_TenantDayAcrossRuns(t *testing.T) {
	t.Parallel()
	l := budget.NewLedger(nil)
	day := budget.Limit{Tokens: 100, TokensName: "tokens_per_day"}
	a := budget.NewMeter(budget.MeterConfig{Prices: prices(t), Tenant: "acme", Ledger: l, Day: day})
	b := budget.NewMeter(budget.MeterConfig{Prices: prices(t), Tenant: "acme", Ledger: l, Day: day})
	c := budget.NewMeter(budget.MeterConfig{Prices: prices(t), Tenant: "other", Ledger: l, Day: day})
	a.Add("m", use(60))
	if v := c.Add("m", use(60)); v.Over != "" {
		t.Fatalf("another tenant: %+v", v)
	}
	if v := b.Add("m", use(60)); !strings.Contains(v.Over, "tenant acme today") || !strings.Contains(v.Over, "tokens_per_day") {
		t.Fatalf("second run of acme: %+v, want over its day", v)
	}
	if got := l.Spent("acme"); got.Tokens != 120 {
		t.Fatalf("acme today: %+v", got)
	}
	if !day.Exhausted(l.Spent("acme")) || day.Exhausted(l.Spent("other")) {
		t.Fatal("Exhausted: acme is, other is not")
	}
}

// TestLedger_ResetsAtUTCMidnight: the day's spend starts from zero at
// midnight UTC (not at local midnight, not 24 h after the first spend).
func TestLedger_ResetsAtUTCMidnight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tz := time.FixedZone("UTC-5", -5*3600)
		// synctest's clock starts at 2000-01-01 00:00 UTC: move to 23:00 UTC.
		time.Sleep(23 * time.Hour)
		l := budget.NewLedger(func() time.Time { return time.Now().In(tz) })
		l.Add("acme", budget.Spend{Tokens: 50})
		if got := l.UntilMidnight(); got != time.Hour {
			t.Fatalf("UntilMidnight = %v, want 1h", got)
		}
		time.Sleep(59 * time.Minute)
		if got := l.Spent("acme").Tokens; got != 50 {
			t.Fatalf("23:59 UTC: %d tokens, want 50", got)
		}
		time.Sleep(time.Minute)
		if got := l.Spent("acme").Tokens; got != 0 {
			t.Fatalf("00:00 UTC: %d tokens, want 0 (a new day)", got)
		}
		l.Add("acme", budget.Spend{Tokens: 7})
		if got := l.Spent("acme").Tokens; got != 7 {
			t.Fatalf("the new day: %d", got)
		}
	})
}

func TestLedger_RestoreKeepsOnlyToday(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	l := budget.NewLedger(func() time.Time { return now })
	l.Restore("acme", now.Add(-11*time.Hour), budget.Spend{Tokens: 1000}) // yesterday 23:00
	l.Restore("acme", now.Add(-9*time.Hour), budget.Spend{Tokens: 30})    // today 01:00
	if got := l.Spent("acme").Tokens; got != 30 {
		t.Fatalf("restored %d tokens, want today's 30", got)
	}
}
