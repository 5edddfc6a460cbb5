// Package runlog writes the log lines of runs from their events (an
// actors.Observer): one INFO line when a run starts and one when it ends,
// with what an operator greps for (run, session, tenant, duration, tokens,
// outcome, trace id).
package runlog

import (
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
