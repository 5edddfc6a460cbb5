package agui_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/agui"
)

// TestHandler_Traceparent: an AG-UI run continues the trace of its
// request's traceparent header (run_started.trace_id, trace_parent).
func TestHandler_Traceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	h := newHarness(t, agui.Config{})
	b, err := json.Marshal(input("thread-tp", "run-tp", "q", map[string]any{"scenario": map[string]any{"nodes": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.srv.URL+"/api/v1/agui", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := readRun(t, resp, newVerifier("thread-tp"), nil)
	sum, err := h.engine.Run(messages.LocalTenant, r.conclaveRunID())
	if err != nil || sum.TraceID != tp[3:35] {
		t.Fatalf("the run's trace_id %q (%v), want the traceparent's %s", sum.TraceID, err, tp[3:35])
	}
}
