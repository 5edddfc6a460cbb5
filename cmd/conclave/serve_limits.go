package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/pricing"
	"github.com/conclave-ai/conclave/transport"
)

// serveLimits are the flags of conclave serve that bound connections and
// streams (transport.Config documents each; docs/api.md "Limits").
type serveLimits struct {
	maxConns, maxStreams, maxStreamsPerTenant int
	idleTimeout, readTimeout                  time.Duration
	maxLagEvents, maxLagBytes                 uint64
}

func (l *serveLimits) flags(fs *pflag.FlagSet) {
	fs.IntVar(&l.maxConns, "max-connections", 0, "cap on open client connections; at the cap the oldest idle or header-reading one is closed, else 503 (0: 3/4 of the open-files limit; -1: no cap)")
	fs.IntVar(&l.maxStreams, "max-streams", 0, "cap on open event streams in total, over it 429 too_many_streams (0: 3/4 of --max-connections; -1: no cap)")
	fs.IntVar(&l.maxStreamsPerTenant, "max-streams-per-tenant", 0, "cap on one tenant's open event streams (0: only --max-streams)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", transport.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&l.readTimeout, "read-timeout", transport.DefaultReadTimeout, "bound on reading a request's headers and body (streams are exempt once open)")
	fs.Uint64Var(&l.maxLagEvents, "max-lag-events", 0, "end a stream whose client has this many events not received, with close reason lagging (0: never)")
	fs.Uint64Var(&l.maxLagBytes, "max-lag-bytes", 0, "end a stream whose client has this many bytes written and not received, with close reason lagging (0: never)")
}

func (l *serveLimits) check() error {
	switch {
	case l.idleTimeout != 0 && l.idleTimeout < 100*time.Millisecond: // 0: the default (a serveCmd built without flags)
		return fmt.Errorf("--idle-timeout must be at least 100ms, got %v", l.idleTimeout)
	case l.readTimeout != 0 && l.readTimeout < 100*time.Millisecond:
		return fmt.Errorf("--read-timeout must be at least 100ms, got %v", l.readTimeout)
	case l.maxConns < -1 || l.maxStreams < -1 || l.maxStreamsPerTenant < 0:
		return fmt.Errorf("--max-connections and --max-streams must be >= -1, --max-streams-per-tenant >= 0")
	}
	return nil
}

// apply sets the limits on cfg.
func (l *serveLimits) apply(cfg *transport.Config) {
	cfg.MaxConnections, cfg.MaxStreams, cfg.MaxStreamsPerTenant = l.maxConns, l.maxStreams, l.maxStreamsPerTenant
	cfg.IdleTimeout, cfg.ReadTimeout = l.idleTimeout, l.readTimeout
	cfg.MaxLagEvents, cfg.MaxLagBytes = l.maxLagEvents, l.maxLagBytes
	// The header timeout stays below the read timeout it is part of.
	if l.readTimeout != 0 {
		cfg.ReadHeaderTimeout = min(transport.DefaultReadHeaderTimeout, l.readTimeout)
	}
}

// serveQuotas are the flags of conclave serve that bound what a tenant's
// requests may cost (actors.Limits documents each; docs/api.md "Limits"),
// and --quotas FILE, per-tenant overrides:
//
//	{"default": {"concurrent_runs": 32, ...},
//	 "tenants": {"acme": {"events_per_run": 5000000, "max_streams": 500}}}
//
// A tenant's field that is 0 or absent takes the default's; the default's
// takes the flag's. -1 means no limit.
type serveQuotas struct {
	flagsDefault tenantQuota
	file         string
	pricesFile   string
	hubIdleAfter time.Duration
	sleepAfter   time.Duration
	// costBudgets: some tenant (or the default) has cost_per_run or
	// cost_per_day (set by load): every model then needs a price.
	costBudgets bool
}

// tenantQuota is one tenant's quotas in the --quotas file.
type tenantQuota struct {
	actors.Limits
	// MaxStreams caps the tenant's open event streams (see
	// --max-streams-per-tenant).
	MaxStreams int `json:"max_streams,omitempty"`
}

// quotaFile is the --quotas file.
type quotaFile struct {
	Default tenantQuota                       `json:"default"`
	Tenants map[messages.TenantID]tenantQuota `json:"tenants"`
}

func (q *serveQuotas) flags(fs *pflag.FlagSet) {
	d := &q.flagsDefault
	fs.IntVar(&d.ConcurrentRuns, "concurrent-runs", actors.DefaultConcurrentRuns, "a tenant's runs that have not ended, over it 429 too_many_runs (-1: no limit)")
	fs.Float64Var(&d.RunsPerSecond, "runs-per-second", actors.DefaultRunsPerSecond, "a tenant's sustained rate of run creation, over it 429 rate_limited (-1: no limit)")
	fs.IntVar(&d.RunBurst, "run-burst", actors.DefaultRunBurst, "runs a tenant may create at once above --runs-per-second")
	fs.Int64Var(&d.EventsPerRun, "events-per-run", actors.DefaultEventsPerRun, "a run's event budget: a larger scenario is refused (422 scenario_too_large), a run that exceeds it ends with run_error budget_exceeded (-1: no limit)")
	fs.Int64Var(&d.TokensPerRun, "tokens-per-run", 0, "a run's token budget (its model turns' input and output tokens): a run past it ends with run_error budget_exceeded (0: none)")
	fs.Float64Var(&d.CostPerRun, "cost-per-run", 0, "a run's cost budget in USD, its token_usage priced at --prices: a run past it ends with run_error budget_exceeded (0: none)")
	fs.Int64Var(&d.TokensPerDay, "tokens-per-day", 0, "a tenant's token budget per UTC day over all its runs: past it runs end with budget_exceeded and new ones are refused, 429 insufficient_budget, until midnight UTC (0: none)")
	fs.Float64Var(&d.CostPerDay, "cost-per-day", 0, "a tenant's cost budget per UTC day in USD, likewise (0: none)")
	fs.StringVar(&q.pricesFile, "prices", "", "JSON file of model prices in USD per million tokens overriding and extending the built-in ones: {\"my-model\":{\"input\":0.5,\"cached_input\":0.1,\"output\":1.5}}")
	fs.StringVar(&q.file, "quotas", "", "JSON file of per-tenant quotas overriding these flags: {\"default\":{…},\"tenants\":{\"acme\":{…}}}")
	fs.DurationVar(&q.hubIdleAfter, "hub-idle-after", actors.DefaultHubIdleAfter, "stop a session's hub after this long without runs, subscribers or events (it reloads from the journal on demand; -1s: never)")
	fs.DurationVar(&q.sleepAfter, "sleep-after", actors.DefaultSleepAfter, "a run that waits only on humans and publishes nothing this long falls asleep: its actors leave memory, its interrupts stay pending, and it is rebuilt from the journal when an answer, a timeout, an abort or a steering note comes (-1s: never)")
}

// load reads --quotas and returns each tenant's actors.Limits and stream
// cap (0: the global caps).
func (q *serveQuotas) load() (limits func(messages.TenantID) actors.Limits, streams func(messages.TenantID) int, err error) {
	f := quotaFile{}
	if q.file != "" {
		data, err := os.ReadFile(q.file)
		if err != nil {
			return nil, nil, fmt.Errorf("--quotas: %w", err)
		}
		if err := messages.DecodeStrict(data, &f); err != nil {
			return nil, nil, fmt.Errorf("--quotas %s: %w", q.file, err)
		}
	}
	def := f.Default.or(q.flagsDefault)
	if err := def.check("default"); err != nil {
		return nil, nil, err
	}
	q.costBudgets = def.CostPerRun > 0 || def.CostPerDay > 0
	for t, tq := range f.Tenants {
		if _, err := messages.NewTenantID(string(t)); err != nil {
			return nil, nil, fmt.Errorf("--quotas: %w", err)
		}
		full := tq.or(def)
		if err := full.check("tenant " + string(t)); err != nil {
			return nil, nil, err
		}
		q.costBudgets = q.costBudgets || full.CostPerRun > 0 || full.CostPerDay > 0
	}
	of := func(t messages.TenantID) tenantQuota {
		if tq, ok := f.Tenants[t]; ok {
			return tq.or(def)
		}
		return def
	}
	return func(t messages.TenantID) actors.Limits { return of(t).Limits },
		func(t messages.TenantID) int { return of(t).MaxStreams }, nil
}

// or fills q's zero fields from d.
func (q tenantQuota) or(d tenantQuota) tenantQuota {
	if q.ConcurrentRuns == 0 {
		q.ConcurrentRuns = d.ConcurrentRuns
	}
	if q.RunsPerSecond == 0 {
		q.RunsPerSecond = d.RunsPerSecond
	}
	if q.RunBurst == 0 {
		q.RunBurst = d.RunBurst
	}
	if q.EventsPerRun == 0 {
		q.EventsPerRun = d.EventsPerRun
	}
	if q.TokensPerRun == 0 {
		q.TokensPerRun = d.TokensPerRun
	}
	if q.CostPerRun == 0 {
		q.CostPerRun = d.CostPerRun
	}
	if q.TokensPerDay == 0 {
		q.TokensPerDay = d.TokensPerDay
	}
	if q.CostPerDay == 0 {
		q.CostPerDay = d.CostPerDay
	}
	if q.MaxStreams == 0 {
		q.MaxStreams = d.MaxStreams
	}
	return q
}

func (q tenantQuota) check(who string) error {
	switch {
	case q.ConcurrentRuns < -1 || q.RunBurst < 0 || q.EventsPerRun < -1 || q.MaxStreams < -1 || q.TokensPerRun < 0:
		return fmt.Errorf("quotas of %s: concurrent_runs, events_per_run and max_streams must be >= -1, run_burst and tokens_per_run >= 0", who)
	case q.RunsPerSecond < 0 && q.RunsPerSecond != -1:
		return fmt.Errorf("quotas of %s: runs_per_second must be positive, or -1 for no limit", who)
	case q.TokensPerDay < 0 || !validUSD(q.CostPerRun) || !validUSD(q.CostPerDay):
		return fmt.Errorf("quotas of %s: tokens_per_day must be >= 0, cost_per_run and cost_per_day in 0..%g USD", who, messages.MaxBudgetCostUSD)
	}
	return nil
}

func validUSD(v float64) bool { return v >= 0 && v <= messages.MaxBudgetCostUSD } // false for NaN

// prices loads --prices (loadPrices).
func (q *serveQuotas) prices() (*pricing.Table, error) { return loadPrices(q.pricesFile) }

// loadPrices is the model price table of --prices FILE (serve and run):
// the built-in prices, overridden and extended by the file's ("": the
// built-in ones).
func loadPrices(file string) (*pricing.Table, error) {
	if file == "" {
		return pricing.Default(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	t, err := pricing.Load(data)
	if err != nil {
		return nil, fmt.Errorf("--prices %s: %w", file, err)
	}
	return t, nil
}

// checkPrices refuses a cost budget when a model the server is
// configured with has no price: its cost would be unknown, and a run on
// it would end at its first turn (budget_exceeded). Refusing at start
// says so once, to the operator, instead of to every run. (A model the
// server reports under another name than configured is still caught per
// run: package budget.)
func (q *serveQuotas) checkPrices(t *pricing.Table, models []string) error {
	if !q.costBudgets {
		return nil
	}
	if unknown := t.Unknown(models...); len(unknown) > 0 {
		return fmt.Errorf("a cost budget (--cost-per-run, --cost-per-day, or cost_per_run / cost_per_day in --quotas) needs a price for every model, and %s has none: add it to a --prices file ({\"%s\":{\"input\":…,\"output\":…}} in USD per million tokens), or budget tokens instead (--tokens-per-run, tokens_per_day)", strings.Join(unknown, ", "), unknown[0])
	}
	return nil
}
