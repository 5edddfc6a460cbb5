package fanout

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/conclave-ai/conclave/internal/telemetry"
)

// BenchmarkConclavePublish measures one Engine.Publish (a request to the
// engine actor, then a message to the session hub, which stamps, encodes
// and journals the event), with no subscriber: the publisher's ceiling.
func BenchmarkConclavePublish(b *testing.B) { benchPublish(b, ServerConfig{Rate: 1}) }

// BenchmarkConclavePublishTraced is BenchmarkConclavePublish with tracing
// on: every journaled batch is handed to a tracer (whose projector skips
// these events of no run's), the hub's cost of tracing on the fan-out
// path. Compare with BenchmarkConclavePublish in the same run:
//
//	go test ./internal/fanout -run '^$' -bench 'BenchmarkConclavePublish' -count 3
func BenchmarkConclavePublishTraced(b *testing.B) {
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
	tr := telemetry.NewWithProvider(telemetry.Config{}, provider)
	defer func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	benchPublish(b, ServerConfig{Rate: 1, Tracer: tr})
}

func benchPublish(b *testing.B, cfg ServerConfig) {
	ctx := context.Background()
	t, err := startConclave(ctx, cfg.withDefaults())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := t.shutdown(ctx); err != nil {
			b.Error(err)
		}
	}()
	payload := string(AppendStamp(nil, time.Now().UnixNano(), DefaultPayload))
	for b.Loop() {
		if err := t.publish(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
}
