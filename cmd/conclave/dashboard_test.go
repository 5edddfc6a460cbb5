package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// dashboardFile is the Grafana dashboard shipped in docs/.
const dashboardFile = "../../docs/grafana-dashboard.json"

// pendingMetrics are metrics the dashboard may query before this build
// exposes them: the estimated cost comes with the budgets work.
var pendingMetrics = []string{"conclave_model_cost_usd_total"}

// metricName finds the metric names in a PromQL expression: every
// Conclave, Go and process metric is prefixed so.
var metricName = regexp.MustCompile(`\b(?:conclave|go|process)_[a-z0-9_]+\b`)

type grafanaDashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// exposes reports whether the scraped families hold metric name with at
// least one series: a family of that name, or the _bucket, _sum or
// _count series of a histogram.
func exposes(mfs map[string]*dto.MetricFamily, name string) bool {
	if mf := mfs[name]; mf != nil && len(mf.GetMetric()) > 0 {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if mf := mfs[base]; mf != nil && mf.GetType() == dto.MetricType_HISTOGRAM && len(mf.GetMetric()) > 0 {
				return true
			}
		}
	}
	return false
}

// TestServe_GrafanaDashboardQueriesExposedMetrics: docs/grafana-dashboard.json
// is valid JSON whose every panel queries something, every metric its
// PromQL names is one a real `conclave serve` exposes on /metrics after a
// council run (the cost metric of the budgets work excepted), and it has
// a panel for each metric an operator of LLM runs watches.
func TestServe_GrafanaDashboardQueriesExposedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	named := map[string][]string{} // metric -> the panels naming it
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				named[n] = append(named[n], p.Title)
			}
		}
	}
	for _, m := range []string{
		"conclave_model_tokens_total", "conclave_model_request_duration_seconds_bucket", "conclave_model_time_to_first_token_seconds_bucket",
		"conclave_model_failures_total", "conclave_model_breaker_open", "conclave_model_cost_usd_total",
		"conclave_tool_calls_total", "conclave_tool_call_errors_total", "conclave_tool_call_duration_seconds_bucket",
		"conclave_interrupts_pending", "conclave_interrupt_decision_seconds_bucket",
		"conclave_runs_ended_total", "conclave_run_duration_seconds_bucket",
		"conclave_events_published_total", "conclave_events_delivered_total", "conclave_stream_connections", "conclave_stream_lag_events_max",
	} {
		if len(named[m]) == 0 {
			t.Errorf("no panel shows %s", m)
		}
	}

	a, _ := observedCouncil(t) // its stream closed: conclave_stream_ends_total has a series
	var mfs map[string]*dto.MetricFamily
	deadline := time.Now().Add(hardenWait)
	for {
		mfs = a.scrape(t)
		if exposes(mfs, "conclave_stream_ends_total") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a poll of the server's metrics, with a deadline
	}
	for name, panels := range named {
		if !exposes(mfs, name) && !slices.Contains(pendingMetrics, name) {
			t.Errorf("panels %q query %s, which /metrics does not expose", panels, name)
		}
	}
}
