package telemetry

import (
	"context"
	crand "crypto/rand"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// idGenerator gives a span the ids its context names (withIDs): the
// projector derives every id from the run's events (ids.go). A span
// started without them (nothing of this package does) gets random ones.
type idGenerator struct{}

var _ sdktrace.IDGenerator = idGenerator{}

// NewIDGenerator is the IDGenerator a TracerProvider needs for the
// projector's spans to carry their derived ids.
func NewIDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idsKey struct{}

type wantIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs asks the provider's idGenerator for these ids for the next span
// started with ctx (the trace id counts only for a root span).
func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, wantIDs{trace: tid, span: sid})
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if w, ok := ctx.Value(idsKey{}).(wantIDs); ok && w.trace.IsValid() && w.span.IsValid() {
		return w.trace, w.span
	}
	var tid trace.TraceID
	_, _ = crand.Read(tid[:])
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if w, ok := ctx.Value(idsKey{}).(wantIDs); ok && w.span.IsValid() {
		return w.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	_, _ = crand.Read(sid[:])
	return sid
}
