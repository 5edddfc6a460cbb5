package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/internal/telemetry"
	"github.com/conclave-ai/conclave/tool"
)

// tracingFlags are serve's and run's tracing flags.
type tracingFlags struct {
	otlp    string // --otlp
	content bool   // --otel-content
}

func (f *tracingFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.otlp, "otlp", "", "export traces over OTLP/HTTP to this collector `URL` (as OTEL_EXPORTER_OTLP_ENDPOINT: spans go to URL/v1/traces); the standard OTEL_* variables work too, and without either tracing is off")
	fs.BoolVar(&f.content, "otel-content", false, "put prompt and completion text, tool arguments and results on the exported spans (they may hold private data)")
}

// start starts the OpenTelemetry tracer that --otlp or the standard
// OTEL_* variables (read with getenv) ask for, or returns nil when they
// ask for none.
func (f *tracingFlags) start(ctx context.Context, getenv func(string) string, logger *slog.Logger, tools *tool.Set) (*telemetry.Tracer, error) {
	if f.otlp != "" {
		if u, err := url.Parse(f.otlp); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError(fmt.Errorf("--otlp must be an http or https URL, got %q", f.otlp))
		}
	}
	cfg := telemetry.Config{Endpoint: f.otlp, Content: f.content, Logger: logger, Getenv: getenv,
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
		logger.Info("tracing on: exporting spans over OTLP/HTTP", "otlp", f.otlp, "content", f.content)
	}
	return t, nil
}

// shutdownTracer exports the spans still queued and stops the tracer.
func shutdownTracer(t *telemetry.Tracer, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), serveShutdownGrace)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Warn("tracing: flushing the last spans failed; they are lost", "err", err)
	}
	if n := t.Dropped(); n > 0 {
		logger.Warn("tracing: events were dropped while the span queue was full", "events", n)
	}
}
