package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// scrape reads GET /metrics into its families by name.
func (a *hardenAPI) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, b := a.call(t, http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", code, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// seriesKey names a series by its labels, sorted: `a="x",b="y"`.
func seriesKey(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// labels is seriesKey's form of a label set.
func labels(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%q", kv[i], kv[i+1]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// sample is what a series holds: a counter's or gauge's value, or a
// histogram's count and sum.
type sample struct {
	value, count, sum float64
}

func samples(mf *dto.MetricFamily) map[string]sample {
	out := map[string]sample{}
	for _, m := range mf.GetMetric() {
		var s sample
		switch {
		case m.Counter != nil:
			s.value = m.GetCounter().GetValue()
		case m.Gauge != nil:
			s.value = m.GetGauge().GetValue()
		case m.Histogram != nil:
			s.count, s.sum = float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
		}
		out[seriesKey(m)] = s
	}
	return out
}

// observedCouncil runs a council through a real `conclave serve` with
// the OpenAI backend on openaitest — a team, a debate with a judge, the
// kid MCP server's tool, sub-agents — every approval (hitl tools: the
// plan, each node, each tool call) answered over the API, and returns the server's API
// and the run's events, up to its run_finished. The session's stream is
// closed when it returns.
func observedCouncil(t *testing.T) (*hardenAPI, []*messages.Envelope) {
	t.Helper()
	sc := messages.Scenario{Nodes: 5, Waves: 3, Tokens: 6, ReasoningTokens: 2, SynthesisTokens: 4, Teams: 1, TeamSize: 2,
		Calls: []string{"kid.shout"}, SubagentsPerNode: 1, Debate: &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 1, Judge: true}}
	llm := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	srv := startServe(t, 0, nil, "--model", "openai", "--model-url", llm.URL, "--model-name", "council-model",
		"--role-model", "director=strong-model", "--model-context-tokens", "100000", "--runs-per-second", "-1",
		"--mcp", mcpChildFlag(t, "kid"))
	a := newHardenAPI(t, srv, "")
	body, err := json.Marshal(messages.StartRun{Question: "why is the sky blue", HITL: messages.HITLTools, Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	rc := a.mustStartRun(t, string(body))
	s := a.mustStream(t, rc.SessionID, 0)
	defer s.close()
	var events []*messages.Envelope
	for {
		env := s.mustEnv(t)
		events = append(events, env)
		if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok {
			if code, _, b := a.call(t, http.MethodPost, "/api/v1/interrupts/"+url.PathEscape(p.InterruptID)+"/resume", `{"decision":"approve"}`); code != http.StatusOK {
				t.Fatalf("approve = %d %s", code, b)
			}
		}
		if env.RunID == rc.RunID && env.Type.Terminal() {
			break
		}
	}
	if events[len(events)-1].Type != messages.RunFinished {
		t.Fatalf("the run ended with %s", describe(events[len(events)-1]))
	}
	return a, events
}

// TestServe_MetricsMatchTheRun: after a council run through a real
// `conclave serve` (OpenAI backend on openaitest, an MCP server's tool,
// sub-agents, a plan approval answered by a human), every run metric on
// /metrics holds exactly what the run's events report: tokens by model,
// role and type, model turn durations and times to first token, tool
// calls, errors and durations, the human's decision time, the run's
// outcome and duration; nothing is left pending. Before internal/runmetrics
// none of these series existed.
func TestServe_MetricsMatchTheRun(t *testing.T) {
	t.Parallel()
	a, events := observedCouncil(t)

	// What the events say, summed as an operator would.
	want := map[string]map[string]sample{}
	put := func(metric, key string, f func(*sample)) {
		if want[metric] == nil {
			want[metric] = map[string]sample{}
		}
		s := want[metric][key]
		f(&s)
		want[metric][key] = s
	}
	raised := map[string]*messages.Envelope{}
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.TokenUsagePayload:
			role := p.Role
			if role == "" {
				role = messages.ParseStreamID(env.Lane.StreamID).Kind.AgentRole()
			}
			for typ, n := range map[string]int64{"input": p.InputTokens, "output": p.OutputTokens, "cache_read": p.CacheReadTokens, "cache_create": p.CacheCreateTokens} {
				put("conclave_model_tokens_total", labels("model", p.Model, "role", role, "type", typ), func(s *sample) { s.value += float64(n) })
			}
			put("conclave_model_request_duration_seconds", labels("model", p.Model), func(s *sample) { s.count++; s.sum += float64(p.DurationMS) / 1000 })
			if p.FirstTokenMS > 0 {
				put("conclave_model_time_to_first_token_seconds", labels("model", p.Model), func(s *sample) { s.count++; s.sum += float64(p.FirstTokenMS) / 1000 })
			}
		case *messages.ToolCallFinishedPayload:
			put("conclave_tool_calls_total", labels("tool", p.Tool), func(s *sample) { s.value++ })
			put("conclave_tool_call_errors_total", labels("tool", p.Tool), func(s *sample) {
				if p.IsError {
					s.value++
				}
			})
			put("conclave_tool_call_duration_seconds", labels("tool", p.Tool), func(s *sample) { s.count++; s.sum += float64(p.DurationMS) / 1000 })
		case *messages.InterruptRaisedPayload:
			raised[p.InterruptID] = env
		case *messages.InterruptResolvedPayload:
			put("conclave_interrupt_decision_seconds", labels("kind", string(p.Kind), "decision", string(p.Decision)), func(s *sample) {
				s.count++
				s.sum += env.Timestamp.Sub(raised[p.InterruptID].Timestamp).Seconds()
			})
		case *messages.RunFinishedPayload:
			put("conclave_runs_ended_total", labels("outcome", "finished"), func(s *sample) { s.value++ })
			put("conclave_run_duration_seconds", labels("outcome", "finished"), func(s *sample) { s.count++; s.sum += float64(p.DurationMS) / 1000 })
		}
	}
	for _, k := range messages.InterruptKinds() {
		put("conclave_interrupts_pending", labels("kind", string(k)), func(*sample) {})
	}
	for _, m := range []string{"conclave_model_tokens_total", "conclave_model_request_duration_seconds", "conclave_model_time_to_first_token_seconds",
		"conclave_tool_calls_total", "conclave_interrupt_decision_seconds"} {
		if len(want[m]) == 0 {
			t.Fatalf("the run's events have nothing for %s: the scenario does not exercise it", m)
		}
	}
	for _, part := range []string{`kind="plan_approval"`, `kind="node_approval"`, `kind="tool_approval"`} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(want["conclave_interrupt_decision_seconds"])), func(k string) bool { return strings.Contains(k, part) }) {
			t.Fatalf("no decision of %s in the run: %v", part, want["conclave_interrupt_decision_seconds"])
		}
	}
	for model, roles := range map[string][]string{"strong-model": {"director"}, "council-model": {"worker", "subagent", "synthesizer", "debater", "judge"}} {
		for _, role := range roles {
			if _, ok := want["conclave_model_tokens_total"][labels("model", model, "role", role, "type", "input")]; !ok {
				t.Fatalf("no turn of a %s on %s in the run", role, model)
			}
		}
	}
	if len(want["conclave_tool_calls_total"]) < 2 {
		t.Fatalf("tool calls %v: want the MCP tool's and delegate's", want["conclave_tool_calls_total"])
	}

	got := a.scrape(t)
	for metric, series := range want {
		mf := got[metric]
		if mf == nil {
			t.Errorf("/metrics has no %s", metric)
			continue
		}
		have := samples(mf)
		if len(have) != len(series) {
			t.Errorf("%s has %d series, the events %d:\n  /metrics %v\n  events   %v", metric, len(have), len(series), have, series)
		}
		for key, w := range series {
			h, ok := have[key]
			if !ok {
				t.Errorf("%s{%s} missing", metric, key)
				continue
			}
			if h.value != w.value || h.count != w.count || math.Abs(h.sum-w.sum) > 1e-9 {
				t.Errorf("%s{%s} = %+v, the events say %+v", metric, key, h, w)
			}
		}
	}
	// Every failure class is listed, at 0 in a run without failures.
	if mf := got["conclave_model_failures_total"]; mf == nil || len(mf.GetMetric()) != len(modelFailureClasses) {
		t.Errorf("conclave_model_failures_total: %v, want a series per class (%d)", mf, len(modelFailureClasses))
	} else {
		for k, s := range samples(mf) {
			if s.value != 0 {
				t.Errorf("conclave_model_failures_total{%s} = %v in a run without failures", k, s.value)
			}
		}
	}
}
