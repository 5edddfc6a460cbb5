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
