package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/messages"
)

// Span ids are derived from what the events say, never drawn at random:
// the engine, which calls the model and the tools, and the projector,
// which builds the spans from the run's events later and elsewhere, name
// the same span the same way without sharing any state. That is what lets
// the OpenAI request of a turn carry the traceparent of the very span the
// projector exports for that turn (and an MCP call that of its
// execute_tool span).

// derive hashes parts into a span id (never the invalid all-zero one).
func derive(kind string, run messages.RunID, parts ...string) trace.SpanID {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(run))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	var id trace.SpanID
	copy(id[:], h.Sum(sum[:0]))
	if !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], 1)
	}
	return id
}

// RunSpanID is the span id of run's root span.
func RunSpanID(run messages.RunID) trace.SpanID { return derive("run", run) }

// ResumedRunSpanID is the span id of the root span of run's resumption
// that begins at seq (the first event after a restart or a takeover).
func ResumedRunSpanID(run messages.RunID, seq uint64) trace.SpanID {
	return derive("resumed", run, strconv.FormatUint(seq, 10))
}

// LaneSpanID is the span id of a lane (planning, a node, a sub-agent, a
// synthesis, a debate turn...).
func LaneSpanID(run messages.RunID, stream messages.StreamID) trace.SpanID {
	return derive("lane", run, string(stream))
}

// WaveSpanID is the span id of wave n on lane stream (the run's, or a
// team node's).
func WaveSpanID(run messages.RunID, stream messages.StreamID, n int) trace.SpanID {
	return derive("wave", run, string(stream), strconv.Itoa(n))
}

// TurnSpanID is the span id of a model turn: the turn-th (1-based) of
// the attempt-th attempt of the agent on lane stream. role is empty for the
// lane's own agent, the role's name for a turn made on its behalf by
// another role (an advisor's check: token_usage.role).
func TurnSpanID(run messages.RunID, stream messages.StreamID, role string, attempt, turn int) trace.SpanID {
	return derive("turn", run, string(stream), role, strconv.Itoa(attempt), strconv.Itoa(turn))
}

// ToolSpanID is the span id of tool call callID, made by the turn-th turn
// of the attempt-th attempt of the agent on lane stream (call ids are
// unique only within a turn).
func ToolSpanID(run messages.RunID, stream messages.StreamID, attempt, turn int, callID string) trace.SpanID {
	return derive("tool", run, string(stream), strconv.Itoa(attempt), strconv.Itoa(turn), callID)
}

// InterruptSpanID is the span id of an interrupt (its id is unique).
func InterruptSpanID(run messages.RunID, interruptID string) trace.SpanID {
	return derive("interrupt", run, interruptID)
}

// RunTraceID is the trace id a run_started records, if it is a valid one.
func RunTraceID(st *messages.RunStartedPayload) (trace.TraceID, bool) {
	id, err := trace.TraceIDFromHex(st.TraceID)
	return id, err == nil && id.IsValid()
}

// SpanContext is the sampled, remote span context of span id in trace,
// as the engine hands it to a model request or a tool call (the span
// itself is exported by the projector).
func SpanContext(traceID trace.TraceID, id trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: id, TraceFlags: trace.FlagsSampled, Remote: true})
}

// Traceparent is the W3C traceparent header of ctx's span, or "" when ctx
// has no valid span context.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return FormatTraceparent(sc)
}

// FormatTraceparent writes sc as a W3C traceparent (version 00).
func FormatTraceparent(sc trace.SpanContext) string {
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = append(b, sc.TraceID().String()...)
	b = append(b, '-')
	b = append(b, sc.SpanID().String()...)
	b = append(b, '-')
	b = append(b, sc.TraceFlags().String()...)
	return string(b)
}
