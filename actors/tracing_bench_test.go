package actors_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/telemetry"
	"github.com/conclave-ai/conclave/messages"
)

// BenchmarkCouncilTraced is BenchmarkCouncil with tracing on: every event
// goes to the tracer, which projects the run's spans and exports them
// through the SDK's batch processor to an exporter that discards them (the
// cost of the network is the collector's). Its wall time includes the
// tracer's drain after the run. Compare with BenchmarkCouncil (tracing off)
// in the same run.
//
//	go test ./actors -run '^$' -bench 'BenchmarkCouncil(Traced)?$' -benchtime 5x -count 3
func BenchmarkCouncilTraced(b *testing.B) {
	benchCouncilWith(b, messages.StartRun{Question: "bench", Scenario: &messages.Scenario{Nodes: 1000, Waves: 10, Tokens: 100, Seed: 1}},
		func() (actors.Tracer, func(context.Context) error) {
			provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
			tr := telemetry.NewWithProvider(telemetry.Config{}, provider)
			return tr, func(ctx context.Context) error {
				if err := tr.Shutdown(ctx); err != nil {
					return err
				}
				if n := tr.Dropped(); n > 0 {
					b.Fatalf("%d events dropped", n)
				}
				return nil
			}
		})
}
