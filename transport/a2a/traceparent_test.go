package a2a_test

import (
	"testing"

	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// TestHandler_Traceparent: an A2A run continues the trace of its
// request's traceparent header (run_started.trace_id, trace_parent).
func TestHandler_Traceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	hs := newHarness(t, a2a.Config{})
	body := hs.body("SendMessage", map[string]any{"message": userText("q", map[string]any{"scenario": map[string]any{"nodes": 1}})})
	mustResult[a2a.SendMessageResponse](t, hs.raw(body, map[string]string{"Traceparent": tp}))
	runs, _, err := hs.engine.Runs(t.Context(), runindex.Filter{Tenant: messages.LocalTenant, Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].TraceID != tp[3:35] {
		t.Fatalf("runs %+v (%v): want one whose trace_id is the traceparent's %s", runs, err, tp[3:35])
	}
}
