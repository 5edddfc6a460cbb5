// Package runmetrics turns the events of runs into Prometheus metrics: an
// actors.Observer, so that no actor carries metrics code. It counts model
// tokens, times model turns and tool calls, times human decisions and
// counts and times runs, from the events alone (token_usage,
// tool_call_finished, interrupt_*, run_finished, run_error).
package runmetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/messages"
)

// Config configures Metrics. The zero value is valid.
type Config struct {
	// MaxModels and MaxTools bound the distinct values of the model and
	// tool labels: model and tool names come from configuration and from
	// the model's answers, so past the bound a new name is counted as
	// "other" (the first names seen keep their own series). Defaults
	// DefaultMaxModels and DefaultMaxTools.
	MaxModels, MaxTools int
}

// Label bounds (Config).
const (
	DefaultMaxModels = 32
	DefaultMaxTools  = 64
	// maxTracked bounds the runs whose trace id is kept and the pending
	// interrupts whose raise time is kept (both forgotten when they end):
	// past it, new ones go without an exemplar or a decision time.
	maxTracked = 100_000
)

// Other is the label value of the names past a label's bound.
const Other = "other"

// Metrics is an actors.Observer and a prometheus.Collector. Its methods
// are safe for concurrent use.
type Metrics struct {
	models, tools *boundedLabel

	tokens       *prometheus.CounterVec
	turnDuration *prometheus.HistogramVec
	firstToken   *prometheus.HistogramVec
	toolCalls    *prometheus.CounterVec
	toolErrors   *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	decisions    *prometheus.HistogramVec
	runs         *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec

	mu         sync.Mutex                 // guards the maps below
	traces     map[messages.RunID]string  // live runs' trace ids
	interrupts map[string]raisedInterrupt // pending interrupts by id
}

type raisedInterrupt struct {
	run messages.RunID
	at  time.Time
}

// New returns the metrics, all zero.
func New(cfg Config) *Metrics {
	if cfg.MaxModels <= 0 {
		cfg.MaxModels = DefaultMaxModels
	}
	if cfg.MaxTools <= 0 {
		cfg.MaxTools = DefaultMaxTools
	}
	return &Metrics{
		models: newBoundedLabel(cfg.MaxModels),
		tools:  newBoundedLabel(cfg.MaxTools),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_model_tokens_total",
			Help: "Model tokens, from token_usage events, by model, role (director, worker, subagent, synthesizer, debater, judge, advisor, steerer) and type: input, output, cache_read (the part of input read from the prompt cache), cache_create (the part written to it).",
		}, []string{"model", "role", "type"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conclave_model_request_duration_seconds",
			Help:    "Model turns' duration, from the request to the usage report (token_usage duration_ms), by model.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640},
		}, []string{"model"}),
		firstToken: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conclave_model_time_to_first_token_seconds",
			Help:    "Model turns' time to first token (token_usage first_token_ms; turns that reported none are left out), by model.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128},
		}, []string{"model"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_tool_calls_total",
			Help: "Tool calls finished (tool_call_finished), by tool.",
		}, []string{"tool"}),
		toolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_tool_call_errors_total",
			Help: "Tool calls that finished with an error (is_error: failed, timed out, refused or rejected by a human), by tool.",
		}, []string{"tool"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conclave_tool_call_duration_seconds",
			Help:    "Tool calls' duration (tool_call_finished duration_ms), by tool.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"tool"}),
		decisions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conclave_interrupt_decision_seconds",
			Help:    "Time from interrupt_raised to its interrupt_resolved (decision approve, reject, revise, cancel, or answered for an info request) or interrupt_expired (decision expired), by kind. Interrupts raised before the server started are left out.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
		}, []string{"kind", "decision"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conclave_runs_ended_total",
			Help: "Runs ended, by outcome: finished (run_finished) or the code of their run_error (node_failed, planning_failed, aborted, interrupted, …).",
		}, []string{"outcome"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "conclave_run_duration_seconds",
			Help:    "Runs' duration (duration_ms of run_finished or run_error), by outcome.",
			Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
		}, []string{"outcome"}),
		traces:     map[messages.RunID]string{},
		interrupts: map[string]raisedInterrupt{},
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.tokens, m.turnDuration, m.firstToken, m.toolCalls, m.toolErrors, m.toolDuration, m.decisions, m.runs, m.runDuration}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Observe implements actors.Observer: it counts what the events report.
func (m *Metrics) Observe(_ messages.TenantID, events []*messages.Envelope) {
	for _, env := range events {
		m.observe(env)
	}
}

// Resumed implements actors.Resumer: a run rebuilt after a restart keeps
// its trace id as its observations' exemplar.
func (m *Metrics) Resumed(run messages.RunID, started *messages.RunStartedPayload) {
	if started != nil {
		m.keepTrace(run, started)
	}
}

func (m *Metrics) keepTrace(run messages.RunID, p *messages.RunStartedPayload) {
	if p.TraceID == "" {
		return
	}
	m.mu.Lock()
	if len(m.traces) < maxTracked {
		m.traces[run] = p.TraceID
	}
	m.mu.Unlock()
}

func (m *Metrics) observe(env *messages.Envelope) {
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload:
		m.keepTrace(env.RunID, p)
	case *messages.TokenUsagePayload:
		ex := m.exemplar(env.RunID)
		model := m.models.value(p.Model)
		role := p.Role
		if role == "" {
			role = messages.ParseStreamID(env.Lane.StreamID).Kind.AgentRole()
		}
		if role == "" {
			role = "unknown"
		}
		for _, t := range []struct {
			typ string
			n   int64
		}{{"input", p.InputTokens}, {"output", p.OutputTokens}, {"cache_read", p.CacheReadTokens}, {"cache_create", p.CacheCreateTokens}} {
			add(m.tokens.WithLabelValues(model, role, t.typ), float64(t.n), ex)
		}
		observe(m.turnDuration.WithLabelValues(model), seconds(p.DurationMS), ex)
		if p.FirstTokenMS > 0 {
			observe(m.firstToken.WithLabelValues(model), seconds(p.FirstTokenMS), ex)
		}
	case *messages.ToolCallFinishedPayload:
		ex := m.exemplar(env.RunID)
		tool := m.tools.value(p.Tool)
		add(m.toolCalls.WithLabelValues(tool), 1, ex)
		errs := m.toolErrors.WithLabelValues(tool) // the series exists from the first call on
		if p.IsError {
			add(errs, 1, ex)
		}
		observe(m.toolDuration.WithLabelValues(tool), seconds(p.DurationMS), ex)
	case *messages.InterruptRaisedPayload:
		m.mu.Lock()
		if len(m.interrupts) < maxTracked {
			m.interrupts[p.InterruptID] = raisedInterrupt{run: env.RunID, at: env.Timestamp}
		}
		m.mu.Unlock()
	case *messages.InterruptResolvedPayload:
		decision := string(p.Decision)
		if decision == "" {
			decision = "answered" // an info request's answer
		}
		m.decided(env, p.InterruptID, p.Kind, decision)
	case *messages.InterruptExpiredPayload:
		m.decided(env, p.InterruptID, p.Kind, "expired")
	case *messages.RunFinishedPayload:
		m.ended(env, "finished", p.DurationMS)
	case *messages.RunErrorPayload:
		m.ended(env, string(p.Code), p.DurationMS)
	}
}

// decided observes how long interrupt id waited for its outcome.
func (m *Metrics) decided(env *messages.Envelope, id string, kind messages.InterruptKind, decision string) {
	m.mu.Lock()
	r, ok := m.interrupts[id]
	delete(m.interrupts, id)
	m.mu.Unlock()
	if !ok { // raised before this process started
		return
	}
	observe(m.decisions.WithLabelValues(string(kind), decision), max(env.Timestamp.Sub(r.at).Seconds(), 0), m.exemplar(env.RunID))
}

// ended counts a run's end and forgets what was kept for it.
func (m *Metrics) ended(env *messages.Envelope, outcome string, durationMS int64) {
	ex := m.exemplar(env.RunID)
	add(m.runs.WithLabelValues(outcome), 1, ex)
	observe(m.runDuration.WithLabelValues(outcome), seconds(durationMS), ex)
	m.mu.Lock()
	delete(m.traces, env.RunID)
	// A run ends with its interrupts closed (resolved, expired or
	// cancelled), so this finds none but a raised one whose close was not
	// journaled; it walks every pending interrupt of every run, a few in
	// practice (at most maxTracked).
	for id, r := range m.interrupts {
		if r.run == env.RunID {
			delete(m.interrupts, id)
		}
	}
	m.mu.Unlock()
}

// exemplar is the exemplar of an observation for run: its trace id, or
// nil when it has none.
func (m *Metrics) exemplar(run messages.RunID) prometheus.Labels {
	m.mu.Lock()
	id := m.traces[run]
	m.mu.Unlock()
	if id == "" {
		return nil
	}
	return prometheus.Labels{"trace_id": id}
}

func add(c prometheus.Counter, v float64, ex prometheus.Labels) {
	if ea, ok := c.(prometheus.ExemplarAdder); ok && ex != nil {
		ea.AddWithExemplar(v, ex)
		return
	}
	c.Add(v)
}

func observe(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && ex != nil {
		eo.ObserveWithExemplar(v, ex)
		return
	}
	o.Observe(v)
}

func seconds(ms int64) float64 { return float64(ms) / 1000 }

// boundedLabel keeps a label's cardinality bounded: the first max distinct
// values are kept, later ones read Other. An empty value reads "unknown".
type boundedLabel struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
}

func newBoundedLabel(max int) *boundedLabel {
	return &boundedLabel{max: max, seen: map[string]struct{}{}}
}

func (b *boundedLabel) value(s string) string {
	if s == "" {
		return "unknown"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[s]; ok {
		return s
	}
	if len(b.seen) >= b.max {
		return Other
	}
	b.seen[s] = struct{}{}
	return s
}
