package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/conclave-ai/conclave/internal/telemetry"
	"github.com/conclave-ai/conclave/tool"
)

// tracer starts the OpenTelemetry tracer that --otlp or the standard
// OTEL_* variables ask for, or returns nil when they ask for none.
func (c *serveCmd) tracer(ctx context.Context, logger *slog.Logger, tools *tool.Set) (*telemetry.Tracer, error) {
	if c.otlp != "" {
		if u, err := url.Parse(c.otlp); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError(fmt.Errorf("--otlp must be an http or https URL, got %q", c.otlp))
		}
	}
	cfg := telemetry.Config{Endpoint: c.otlp, Content: c.otelContent, Logger: logger, Getenv: c.app.env,
		Risk: func(name string) string {
			_, def, ok := tools.Lookup(name)
			if !ok {
				if def, ok = tool.Builtin(name); !ok { // the runtime's own (delegate, ask_human...)
					return ""
				}
			}
			if def.Risk == "" {
				return string(tool.RiskLow)
			}
			return string(def.Risk)
		}}
	t, err := telemetry.New(ctx, cfg)
	if err != nil {
		return nil, usageError(err)
	}
	if t != nil {
		logger.Info("tracing on: exporting spans over OTLP/HTTP", "endpoint", c.otlp, "content", c.otelContent)
	}
	return t, nil
}

// shutdownTracer exports the spans still queued and stops the tracer.
func shutdownTracer(t *telemetry.Tracer, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), serveShutdownGrace)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Error("tracing: flushing the last spans failed", "err", err)
	}
	if n := t.Dropped(); n > 0 {
		logger.Warn("tracing: events were dropped while the span queue was full", "events", n)
	}
}
