// Package runlog writes the log lines of runs from their events (an
// actors.Observer): one INFO line when a run starts and one when it ends,
// with what an operator greps for (run, session, tenant, duration, tokens,
// outcome, trace id).
package runlog

import (
	"context"
	"log/slog"
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// Config configures a Log. The zero value is valid.
type Config struct {
	// Logger receives the lines. Default: discard.
	Logger *slog.Logger
}

// maxTraced bounds the live runs whose trace id is kept for their end
// line (forgotten when they end); past it, end lines go without one.
const maxTraced = 100_000

// Log is an actors.Observer; safe for concurrent use.
type Log struct {
	logger *slog.Logger

	mu     sync.Mutex
	traces map[messages.RunID]string
}

// New returns a Log.
func New(cfg Config) *Log {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Log{logger: cfg.Logger, traces: map[messages.RunID]string{}}
}

// Observe implements actors.Observer.
func (l *Log) Observe(tenant messages.TenantID, events []*messages.Envelope) {
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.RunStartedPayload:
			attrs := []any{"run", env.RunID, "session", env.SessionID, "tenant", tenant, "hitl", p.HITL}
			if p.RequestID != "" {
				attrs = append(attrs, "request_id", p.RequestID)
			}
			if p.RewindOf != nil {
				attrs = append(attrs, "rewind_of", p.RewindOf.RunID)
			}
			if id := l.started(env.RunID, p); id != "" {
				attrs = append(attrs, "trace_id", id)
			}
			l.logger.Info("run started", attrs...)
		case *messages.RunFinishedPayload:
			l.ended(tenant, env, "finished", "", p.DurationMS, p.Usage, p.Nodes)
		case *messages.RunErrorPayload:
			l.ended(tenant, env, string(p.Code), p.Message, p.DurationMS, p.Usage, p.Nodes)
		}
	}
}

// Resumed implements actors.Resumer: a run rebuilt after a restart keeps
// its trace id on its lines and its end line.
func (l *Log) Resumed(run messages.RunID, started *messages.RunStartedPayload) {
	if started != nil {
		l.started(run, started)
	}
}

// started keeps and returns the run's trace id, if it has one.
func (l *Log) started(run messages.RunID, p *messages.RunStartedPayload) string {
	id := p.TraceID
	if id != "" {
		l.mu.Lock()
		if len(l.traces) < maxTraced {
			l.traces[run] = id
		}
		l.mu.Unlock()
	}
	return id
}

func (l *Log) ended(tenant messages.TenantID, env *messages.Envelope, outcome, msg string, durationMS int64, u messages.Usage, n messages.NodeCounts) {
	attrs := []any{"run", env.RunID, "session", env.SessionID, "tenant", tenant, "outcome", outcome, "duration_ms", durationMS,
		"input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "cache_read_tokens", u.CacheReadTokens,
		"nodes_completed", n.Completed, "nodes_failed", n.Failed}
	if msg != "" {
		attrs = append(attrs, "error", msg)
	}
	l.mu.Lock()
	id, ok := l.traces[env.RunID]
	delete(l.traces, env.RunID)
	l.mu.Unlock()
	if ok {
		attrs = append(attrs, "trace_id", id)
	}
	l.logger.Info("run ended", attrs...)
}

// Handler wraps inner so that every line naming a live run (an attribute
// "run", on the line or bound with With) also carries the run's trace id,
// when the run has one and the line does not: the lines an engine writes
// inside a run join its trace in a log search. The trace ids are those
// this Log has seen in run_started events (until the run's end).
func (l *Log) Handler(inner slog.Handler) slog.Handler { return &traceHandler{inner: inner, log: l} }

type traceHandler struct {
	inner slog.Handler
	log   *Log
	run   messages.RunID // bound by WithAttrs
	bound bool           // trace_id bound by WithAttrs
}

func (h *traceHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.bound {
		return h.inner.Handle(ctx, r)
	}
	run, tagged := h.run, false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "run":
			run = runOf(a.Value)
		case "trace_id":
			tagged = true
		}
		return true
	})
	if run != "" && !tagged {
		if id := h.log.trace(run); id != "" {
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", id))
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(attrs)
	for _, a := range attrs {
		switch a.Key {
		case "run":
			c.run = runOf(a.Value)
		case "trace_id":
			c.bound = true
		}
	}
	return &c
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}

// runOf reads a run id attribute (a messages.RunID or a string).
func runOf(v slog.Value) messages.RunID {
	v = v.Resolve()
	if v.Kind() == slog.KindString {
		return messages.RunID(v.String())
	}
	if id, ok := v.Any().(messages.RunID); ok {
		return id
	}
	return messages.RunID(v.String())
}

// trace is the trace id of a live run ("" for none).
func (l *Log) trace(run messages.RunID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.traces[run]
}
