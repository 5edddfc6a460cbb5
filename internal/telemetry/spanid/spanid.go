// Package spanid derives the span ids of a run's spans from what its
// events say, and writes W3C traceparents. It is apart from package
// telemetry (the SDK, the exporter, the projector) so that the engine, the
// OpenAI backend and the MCP client, which only hand span contexts on, do
// not depend on the SDK.
package spanid

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

// Run is the span id of run's root span.
func Run(run messages.RunID) trace.SpanID { return derive("run", run) }

// ResumedRun is the span id of the root span of run's resumption
// that begins at seq (the first event after a restart or a takeover).
func ResumedRun(run messages.RunID, seq uint64) trace.SpanID {
	return derive("resumed", run, strconv.FormatUint(seq, 10))
}

// Lane is the span id of a lane (planning, a node, a sub-agent, a
// synthesis, a debate turn...).
func Lane(run messages.RunID, stream messages.StreamID) trace.SpanID {
	return derive("lane", run, string(stream))
}

// Wave is the span id of wave n on lane stream (the run's, or a
// team node's).
func Wave(run messages.RunID, stream messages.StreamID, n int) trace.SpanID {
	return derive("wave", run, string(stream), strconv.Itoa(n))
}

// Turn is the span id of a model turn: the turn-th (1-based) of
// the attempt-th attempt of the agent on lane stream. role is empty for the
// lane's own agent, the role's name for a turn made on its behalf by
// another role (an advisor's check: token_usage.role).
func Turn(run messages.RunID, stream messages.StreamID, role string, attempt, turn int) trace.SpanID {
	return derive("turn", run, string(stream), role, strconv.Itoa(attempt), strconv.Itoa(turn))
}

// Tool is the span id of tool call callID, made by the turn-th turn
// of the attempt-th attempt of the agent on lane stream (call ids are
// unique only within a turn).
func Tool(run messages.RunID, stream messages.StreamID, attempt, turn int, callID string) trace.SpanID {
	return derive("tool", run, string(stream), strconv.Itoa(attempt), strconv.Itoa(turn), callID)
}

// Interrupt is the span id of an interrupt (its id is unique).
func Interrupt(run messages.RunID, interruptID string) trace.SpanID {
	return derive("interrupt", run, interruptID)
}

// RunTrace is the trace id a run_started records, if it is a valid one.
func RunTrace(st *messages.RunStartedPayload) (trace.TraceID, bool) {
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
