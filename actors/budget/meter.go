package budget

import (
	"sync"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
)

// Meter counts one run's model spend against the run's budget and its
// tenant's day. Safe for concurrent use (its run's model streams and
// actors add to it). The zero Meter is not usable: see NewMeter.
type Meter struct {
	prices *pricing.Table
	run    Limit
	tenant messages.TenantID
	ledger *Ledger // nil: no day is counted
	day    Limit

	mu     sync.Mutex // guards what follows
	spent  Spend
	warned bool // a Near verdict was given
	over   bool // an Over verdict was given
}

// MeterConfig configures a Meter.
type MeterConfig struct {
	Prices *pricing.Table // nil: every model unpriced
	Run    Limit          // the run's budget
	Tenant messages.TenantID
	Ledger *Ledger // the tenants' days; nil: none counted
	Day    Limit   // the tenant's budget per day
}

// NewMeter returns a meter at zero.
func NewMeter(c MeterConfig) *Meter {
	return &Meter{prices: c.Prices, run: c.Run, tenant: c.Tenant, ledger: c.Ledger, day: c.Day}
}

// Restore sets the run's spend so far from its usage per model (a run
// resumed after a restart or woken). The tenant's day is rebuilt separately
// (Ledger.Restore): it is not added to here.
func (m *Meter) Restore(byModel map[string]messages.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for model, u := range byModel {
		m.spent = m.spent.Add(Of(m.prices, model, u))
	}
	// A run past NearPercent was warned before the restart (the warning
	// is in its journal): not twice.
	state, _ := m.run.Check("the run", m.spent)
	m.warned = state >= Near
}

// Verdict is what one Add counted and decided: Spend is the turn's spend,
// Near the warning to give (once per run), Over the reason the run must
// end (once per run); both are empty most of the time.
type Verdict struct {
	Spend      Spend
	Near, Over string
}

// Add counts one model turn's usage on model, and says whether the run
// is now near or over its budget or its tenant's day's.
func (m *Meter) Add(model string, u messages.Usage) Verdict {
	s := Of(m.prices, model, u)
	var today Spend
	if m.ledger != nil {
		today = m.ledger.Add(m.tenant, s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent = m.spent.Add(s)
	if m.over {
		return Verdict{Spend: s}
	}
	state, why := m.run.Check("the run", m.spent)
	if state != Over && m.ledger != nil {
		if ds, dwhy := m.day.Check("tenant "+string(m.tenant)+" today", today); ds > state {
			state, why = ds, dwhy
		}
	}
	switch {
	case state == Over:
		m.over = true
		return Verdict{Spend: s, Over: why}
	case state == Near && !m.warned:
		m.warned = true
		return Verdict{Spend: s, Near: why}
	}
	return Verdict{Spend: s}
}

// Spent is the run's spend so far.
func (m *Meter) Spent() Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent
}

// Limit is the run's budget.
func (m *Meter) Limit() Limit { return m.run }
