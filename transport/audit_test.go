package transport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

// TestAPI_Audit: an abort is in the aborting tenant's audit log (and only
// there) once its terminal event is streamed, the page verifies under the
// server's key, paging follows next_after, and bad queries are 400s.
func TestAPI_Audit(t *testing.T) {
	t.Parallel()
	log, pub := testkit.AuditLog(t) // before the engine: it shuts down first
	var toks transport.Tokens
	if err := toks.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	if err := toks.Add("token-bbbbbbbbbbbbbbbb", "globex"); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, actors.Config{Audit: log}, transport.Config{Tokens: toks, Audit: log})
	acme := []string{"Authorization", "Bearer token-aaaaaaaaaaaaaaaa"}
	globex := []string{"Authorization", "Bearer token-bbbbbbbbbbbbbbbb"}

	var runs []messages.RunID
	for range 2 {
		rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Tokens: 1000, TokenDelayMS: 5}}, acme...)
		resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID), acme...)
		readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.NodeStarted })
		if resp, out := h.do("POST", "/api/v1/runs/"+string(rc.RunID)+"/abort", `{"reason":"enough"}`, acme...); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("abort = %d %s", resp.StatusCode, out)
		}
		readUntil(t, r, terminalOf(rc.RunID))
		resp.Body.Close()
		runs = append(runs, rc.RunID)
	}
	page := func(query string, hdr []string) messages.AuditPage {
		t.Helper()
		resp, out := h.do("GET", "/api/v1/audit?"+query, nil, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/audit?%s = %d %s", query, resp.StatusCode, out)
		}
		var p messages.AuditPage
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := page("limit=1", acme)
	if first.Head != 2 || first.NextAfter != 1 || len(first.Records) != 1 {
		t.Fatalf("first page: %+v", first)
	}
	second := page("after=1&limit=1", acme)
	if second.NextAfter != 2 || len(second.Records) != 1 {
		t.Fatalf("second page: %+v", second)
	}
	recs := append(first.Records, second.Records...)
	for i, r := range recs {
		if r.Kind != messages.AuditAbort || r.RunID != runs[i] || r.Tenant != "acme" || r.Details.Message != "enough" || r.Actor[0] != "tenant:acme" {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if err := audit.Verify(recs, pub); err != nil {
		t.Fatal(err)
	}
	if end := page("after=2", acme); len(end.Records) != 0 || end.NextAfter != 2 {
		t.Fatalf("after the head: %+v", end)
	}
	if other := page("", globex); len(other.Records) != 0 || other.Head != 0 {
		t.Fatalf("globex sees acme's audit log: %+v", other)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=ten", "after=-1", "after=1.5", "after=123456789012345678901"} {
		if resp, out := h.do("GET", "/api/v1/audit?"+q, nil, acme...); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET /api/v1/audit?%s = %d %s", q, resp.StatusCode, out)
		}
	}
	if resp, _ := h.do("GET", "/api/v1/audit", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	if resp, _ := h.do("POST", "/api/v1/audit", nil, acme...); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

// TestAPI_AuditNotConfigured: without an audit log the endpoint is a 404.
func TestAPI_AuditNotConfigured(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	if resp, out := h.do("GET", "/api/v1/audit", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /api/v1/audit = %d %s", resp.StatusCode, out)
	}
}
