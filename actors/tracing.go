package actors

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// The engine does not make spans: the tracer builds them from the run's
// events (Config.Tracer). It only hands a model request and a tool call
// the span context of the span the tracer exports for them, whose id both
// derive from the same facts (spanid.Turn, spanid.Tool),
// so that the model's server and an MCP server see the right parent.

// runTrace is run's trace id, when the engine traces and the run has one.
func runTrace(e *Engine, run *runSpec) (trace.TraceID, bool) {
	if e.cfg.Tracer == nil || run.traceID == "" {
		return trace.TraceID{}, false
	}
	id, err := trace.TraceIDFromHex(run.traceID)
	return id, err == nil
}

// turnSpan is the span context of a model turn's chat span (quiet: a turn
// made on the lane's behalf by req.Role, whose token_usage names it).
func turnSpan(e *Engine, run *runSpec, lane messages.Lane, req model.Request, quiet bool) trace.SpanContext {
	tid, ok := runTrace(e, run)
	if !ok {
		return trace.SpanContext{}
	}
	role := ""
	if quiet {
		role = req.Role.String()
	}
	return spanid.SpanContext(tid, spanid.Turn(run.runID, lane.StreamID, role, req.Attempt, req.Turn))
}

// toolSpan is the span context of a tool call's execute_tool span.
func toolSpan(e *Engine, run *runSpec, lane messages.Lane, attempt, turn int, callID string) trace.SpanContext {
	tid, ok := runTrace(e, run)
	if !ok {
		return trace.SpanContext{}
	}
	return spanid.SpanContext(tid, spanid.Tool(run.runID, lane.StreamID, attempt, turn, callID))
}
