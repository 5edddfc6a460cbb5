package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

func TestServeQuotas_FileOverridesFlags(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "quotas.json")
	if err := os.WriteFile(file, []byte(`{"default":{"concurrent_runs":4},
		"tenants":{"acme":{"events_per_run":-1,"max_streams":500},"small":{"runs_per_second":0.5,"run_burst":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	q := serveQuotas{file: file, flagsDefault: tenantQuota{Limits: actors.Limits{ConcurrentRuns: 32, RunsPerSecond: 10, RunBurst: 50, EventsPerRun: 1000}}}
	limits, streams, err := q.load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant  string
		want    actors.Limits
		streams int
	}{
		{"anyone", actors.Limits{ConcurrentRuns: 4, RunsPerSecond: 10, RunBurst: 50, EventsPerRun: 1000}, 0},
		{"acme", actors.Limits{ConcurrentRuns: 4, RunsPerSecond: 10, RunBurst: 50, EventsPerRun: -1}, 500},
		{"small", actors.Limits{ConcurrentRuns: 4, RunsPerSecond: 0.5, RunBurst: 1, EventsPerRun: 1000}, 0},
	} {
		if got := limits(messages.TenantID(c.tenant)); got != c.want {
			t.Errorf("%s: limits %+v, want %+v", c.tenant, got, c.want)
		}
		if got := streams(messages.TenantID(c.tenant)); got != c.streams {
			t.Errorf("%s: streams %d, want %d", c.tenant, got, c.streams)
		}
	}
}

func TestServeQuotas_BadFiles(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"unknown field":  `{"default":{"concurent_runs":4}}`,
		"trailing data":  `{"default":{}}}`,
		"negative burst": `{"tenants":{"a":{"run_burst":-3}}}`,
		"bad rate":       `{"default":{"runs_per_second":-2}}`,
		"bad tenant id":  `{"tenants":{"a b":{}}}`,
		"negative cost":  `{"default":{"cost_per_run":-1}}`,
		"negative day":   `{"tenants":{"a":{"tokens_per_day":-5}}}`,
		"huge day cost":  `{"tenants":{"a":{"cost_per_day":1e12}}}`,
	} {
		file := filepath.Join(t.TempDir(), "q.json")
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		q := serveQuotas{file: file}
		if _, _, err := q.load(); err == nil || !strings.Contains(err.Error(), "quota") {
			t.Errorf("%s: err = %v, want a --quotas error", name, err)
		}
	}
}

// TestServeQuotas_Budgets: the spend budgets of the quota file fall back
// to the default's and the flags' like the other quotas, and a cost
// budget anywhere makes every model need a price.
func TestServeQuotas_Budgets(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "quotas.json")
	if err := os.WriteFile(file, []byte(`{"default":{"tokens_per_day":1000000},
		"tenants":{"acme":{"cost_per_day":20,"cost_per_run":0.5}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	q := serveQuotas{file: file, flagsDefault: tenantQuota{Limits: actors.Limits{TokensPerRun: 5000}}}
	limits, _, err := q.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := limits("acme"); got.TokensPerRun != 5000 || got.TokensPerDay != 1000000 || got.CostPerDay != 20 || got.CostPerRun != 0.5 {
		t.Fatalf("acme: %+v", got)
	}
	if got := limits("other"); got.CostPerDay != 0 || got.TokensPerDay != 1000000 {
		t.Fatalf("other: %+v", got)
	}
	prices, err := q.prices()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.checkPrices(prices, []string{"gpt-4o", "my-llama"}); err == nil || !strings.Contains(err.Error(), "my-llama has none") {
		t.Fatalf("a cost budget with an unpriced model: %v", err)
	}
	if err := q.checkPrices(prices, []string{"gpt-4o-2024-08-06", "claude-sonnet-4-20250514"}); err != nil {
		t.Fatalf("priced models: %v", err)
	}
	tokensOnly := serveQuotas{flagsDefault: tenantQuota{Limits: actors.Limits{TokensPerDay: 10}}}
	if _, _, err := tokensOnly.load(); err != nil {
		t.Fatal(err)
	}
	if err := tokensOnly.checkPrices(prices, []string{"my-llama"}); err != nil {
		t.Fatalf("token budgets need no price: %v", err)
	}
}
