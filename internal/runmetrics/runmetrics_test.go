package runmetrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/conclave-ai/conclave/internal/runmetrics"
	"github.com/conclave-ai/conclave/messages"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func env(run messages.RunID, lane messages.StreamID, at time.Duration, p messages.Payload) *messages.Envelope {
	return &messages.Envelope{RunID: run, Type: p.EventType(), Timestamp: t0.Add(at), Lane: messages.Lane{StreamID: lane}, Payload: p}
}

// histogram returns the sample count and sum of one histogram series.
func histogram(t *testing.T, c prometheus.Collector, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	m := series(t, c, name, labels)
	if m == nil {
		return 0, 0
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// series finds the series of metric name with exactly labels, or nil.
func series(t *testing.T, c prometheus.Collector, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

func counter(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	m := series(t, c, name, labels)
	if m == nil {
		return -1 // no such series
	}
	return m.GetCounter().GetValue()
}

// TestMetrics_Observe: each metric holds what the events report — tokens
// by model, role (the lane's, or the event's own for an advisor) and type;
// turn and tool durations; a human's decision time from raise to answer;
// runs by outcome with their durations.
func TestMetrics_Observe(t *testing.T) {
	t.Parallel()
	m := runmetrics.New(runmetrics.Config{})
	m.Observe("t", []*messages.Envelope{
		env("r1", messages.RunStream, 0, &messages.RunStartedPayload{Question: "q"}),
		env("r1", messages.DirectorStream, time.Second, &messages.TokenUsagePayload{Model: "big", Turn: 1,
			Usage: messages.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 60}, DurationMS: 1500, FirstTokenMS: 400}),
		env("r1", messages.NodeStream("n1"), 2*time.Second, &messages.TokenUsagePayload{Model: "small", Turn: 1,
			Usage: messages.Usage{InputTokens: 10, OutputTokens: 5}, DurationMS: 250}),
		env("r1", messages.NodeStream("n1"), 3*time.Second, &messages.TokenUsagePayload{Model: "small", Turn: 1, Role: "advisor",
			Usage: messages.Usage{InputTokens: 7, OutputTokens: 1, CacheCreateTokens: 3}, DurationMS: 100, FirstTokenMS: 50}),
		env("r1", messages.NodeStream("n1"), 4*time.Second, &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval}),
		env("r1", messages.NodeStream("n1"), 34*time.Second, &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove}),
		env("r1", messages.NodeStream("n1"), 35*time.Second, &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "kid.shout", DurationMS: 2000}),
		env("r1", messages.NodeStream("n1"), 36*time.Second, &messages.ToolCallFinishedPayload{CallID: "c2", Tool: "kid.shout", IsError: true, DurationMS: 500}),
		env("r1", messages.NodeStream("n1"), 37*time.Second, &messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptInfoRequest}),
		env("r1", messages.NodeStream("n1"), 47*time.Second, &messages.InterruptExpiredPayload{InterruptID: "i2", Kind: messages.InterruptInfoRequest}),
		env("r1", messages.RunStream, 50*time.Second, &messages.RunFinishedPayload{DurationMS: 50_000}),
		env("r2", messages.RunStream, 60*time.Second, &messages.RunErrorPayload{Code: messages.ErrCodeAborted, DurationMS: 3000}),
		// resolved, but raised before the process started: no decision time
		env("r3", messages.NodeStream("n1"), 61*time.Second, &messages.InterruptResolvedPayload{InterruptID: "old", Kind: messages.InterruptToolApproval, Decision: messages.DecisionReject}),
	})
	for _, c := range []struct {
		model, role, typ string
		want             float64
	}{
		{"big", "director", "input", 100}, {"big", "director", "output", 20}, {"big", "director", "cache_read", 60}, {"big", "director", "cache_create", 0},
		{"small", "worker", "input", 10}, {"small", "worker", "output", 5},
		{"small", "advisor", "input", 7}, {"small", "advisor", "cache_create", 3},
	} {
		if got := counter(t, m, "conclave_model_tokens_total", map[string]string{"model": c.model, "role": c.role, "type": c.typ}); got != c.want {
			t.Errorf("tokens %s/%s/%s = %v, want %v", c.model, c.role, c.typ, got, c.want)
		}
	}
	if n, sum := histogram(t, m, "conclave_model_request_duration_seconds", map[string]string{"model": "small"}); n != 2 || sum != 0.35 {
		t.Errorf("small's request durations: %d, sum %v; want 2, 0.35", n, sum)
	}
	if n, sum := histogram(t, m, "conclave_model_time_to_first_token_seconds", map[string]string{"model": "small"}); n != 1 || sum != 0.05 {
		t.Errorf("small's time to first token: %d, sum %v; want 1 (the turn without one left out), 0.05", n, sum)
	}
	if got := counter(t, m, "conclave_tool_calls_total", map[string]string{"tool": "kid.shout"}); got != 2 {
		t.Errorf("tool calls %v, want 2", got)
	}
	if got := counter(t, m, "conclave_tool_call_errors_total", map[string]string{"tool": "kid.shout"}); got != 1 {
		t.Errorf("tool errors %v, want 1", got)
	}
	if n, sum := histogram(t, m, "conclave_tool_call_duration_seconds", map[string]string{"tool": "kid.shout"}); n != 2 || sum != 2.5 {
		t.Errorf("tool durations %d, sum %v; want 2, 2.5", n, sum)
	}
	if n, sum := histogram(t, m, "conclave_interrupt_decision_seconds", map[string]string{"kind": "tool_approval", "decision": "approve"}); n != 1 || sum != 30 {
		t.Errorf("tool approval decisions %d, sum %v; want 1, 30", n, sum)
	}
	if n, sum := histogram(t, m, "conclave_interrupt_decision_seconds", map[string]string{"kind": "info_request", "decision": "expired"}); n != 1 || sum != 10 {
		t.Errorf("expired info requests %d, sum %v; want 1, 10", n, sum)
	}
	if n, _ := histogram(t, m, "conclave_interrupt_decision_seconds", map[string]string{"kind": "tool_approval", "decision": "reject"}); n != 0 {
		t.Errorf("%d decisions of an interrupt never seen raised", n)
	}
	if got := counter(t, m, "conclave_runs_ended_total", map[string]string{"outcome": "finished"}); got != 1 {
		t.Errorf("runs finished %v", got)
	}
	if got := counter(t, m, "conclave_runs_ended_total", map[string]string{"outcome": "aborted"}); got != 1 {
		t.Errorf("runs aborted %v", got)
	}
	if n, sum := histogram(t, m, "conclave_run_duration_seconds", map[string]string{"outcome": "finished"}); n != 1 || sum != 50 {
		t.Errorf("finished runs' durations %d, sum %v", n, sum)
	}
	if problems, err := testutil.CollectAndLint(m); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestMetrics_BoundsLabels: past MaxModels distinct names a model is
// counted as "other", while the names seen first keep their series.
func TestMetrics_BoundsLabels(t *testing.T) {
	t.Parallel()
	m := runmetrics.New(runmetrics.Config{MaxModels: 2, MaxTools: 1})
	for _, name := range []string{"a", "b", "c", "d", "a"} {
		m.Observe("t", []*messages.Envelope{
			env("r", messages.NodeStream("n"), 0, &messages.TokenUsagePayload{Model: name, Usage: messages.Usage{InputTokens: 1}}),
			env("r", messages.NodeStream("n"), 0, &messages.ToolCallFinishedPayload{Tool: "tool-" + name}),
		})
	}
	for model, want := range map[string]float64{"a": 2, "b": 1, runmetrics.Other: 2} {
		if got := counter(t, m, "conclave_model_tokens_total", map[string]string{"model": model, "role": "worker", "type": "input"}); got != want {
			t.Errorf("model %s: %v input tokens, want %v", model, got, want)
		}
	}
	if got := counter(t, m, "conclave_model_tokens_total", map[string]string{"model": "c", "role": "worker", "type": "input"}); got != -1 {
		t.Errorf("model c has its own series past the bound")
	}
	if got := counter(t, m, "conclave_tool_calls_total", map[string]string{"tool": runmetrics.Other}); got != 3 {
		t.Errorf("tool other: %v calls, want 3", got)
	}
	if n := testutil.CollectAndCount(m, "conclave_tool_calls_total"); n != 2 {
		t.Errorf("%d tool series, want 2 (tool-a and other)", n)
	}
}

// TestMetrics_Exemplars: the observations of a run whose run_started
// carries a trace id hold it as their exemplar; a run without one, and
// every run once it has ended, get none.
func TestMetrics_Exemplars(t *testing.T) {
	t.Parallel()
	m := runmetrics.New(runmetrics.Config{})
	m.Observe("t", []*messages.Envelope{
		env("r1", messages.RunStream, 0, &messages.RunStartedPayload{Question: "with trace", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}),
		env("r2", messages.RunStream, 0, &messages.RunStartedPayload{Question: "without"}),
		env("r1", messages.NodeStream("n1"), time.Second, &messages.ToolCallFinishedPayload{Tool: "t1", DurationMS: 10}),
		env("r2", messages.NodeStream("n1"), time.Second, &messages.ToolCallFinishedPayload{Tool: "t2", DurationMS: 10}),
		env("r1", messages.RunStream, 2*time.Second, &messages.RunFinishedPayload{DurationMS: 2000}),
		env("r1", messages.NodeStream("n1"), 3*time.Second, &messages.ToolCallFinishedPayload{Tool: "t3", DurationMS: 10}),
	})
	ex := func(tool string) string {
		s := series(t, m, "conclave_tool_calls_total", map[string]string{"tool": tool})
		if s == nil {
			t.Fatalf("no series for tool %s", tool)
		}
		for _, l := range s.GetCounter().GetExemplar().GetLabel() {
			if l.GetName() == "trace_id" {
				return l.GetValue()
			}
		}
		return ""
	}
	if want := "4bf92f3577b34da6a3ce929d0e0e4736"; ex("t1") != want {
		t.Errorf("t1's exemplar trace id %q, want %q", ex("t1"), want)
	}
	if got := ex("t2"); got != "" {
		t.Errorf("t2 (a run without a trace) has exemplar %q", got)
	}
	if got := ex("t3"); got != "" {
		t.Errorf("t3 (after its run ended) has exemplar %q", got)
	}
	s := series(t, m, "conclave_runs_ended_total", map[string]string{"outcome": "finished"})
	if s.GetCounter().GetExemplar() == nil {
		t.Error("the run's end has no exemplar")
	}
	// A run resumed after a restart (its run_started is not observed again)
	// keeps its trace id: the engine tells the observer (actors.Resumer).
	m.Resumed("r3", &messages.RunStartedPayload{Question: "resumed", TraceID: "0af7651916cd43dd8448eb211c80319c"})
	m.Observe("t", []*messages.Envelope{env("r3", messages.NodeStream("n1"), 4*time.Second, &messages.ToolCallFinishedPayload{Tool: "t4", DurationMS: 10})})
	if want := "0af7651916cd43dd8448eb211c80319c"; ex("t4") != want {
		t.Errorf("t4 (a resumed run's) exemplar trace id %q, want %q", ex("t4"), want)
	}
}

// BenchmarkMetrics_Observe is the hub's cost per event of the metrics
// observer on a typical batch: 64 events, of which one token_usage and
// one tool_call_finished, the rest deltas it skips.
func BenchmarkMetrics_Observe(b *testing.B) {
	m := runmetrics.New(runmetrics.Config{})
	batch := make([]*messages.Envelope, 0, 64)
	batch = append(batch,
		env("r1", messages.NodeStream("n1"), 0, &messages.TokenUsagePayload{Model: "m", Usage: messages.Usage{InputTokens: 10, OutputTokens: 5}, DurationMS: 900, FirstTokenMS: 100}),
		env("r1", messages.NodeStream("n1"), 0, &messages.ToolCallFinishedPayload{Tool: "search", DurationMS: 20}))
	for len(batch) < cap(batch) {
		batch = append(batch, env("r1", messages.NodeStream("n1"), 0, &messages.TextDeltaPayload{Delta: "x"}))
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Observe("t", batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
}
