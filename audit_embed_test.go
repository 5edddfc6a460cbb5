package conclave_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestEngine_Audit: with Options.Audit, an embedder's engine records its
// decisions (a plan approved, a steering applied) and its API handler
// serves them, verifiable under the log's key.
func TestEngine_Audit(t *testing.T) {
	t.Parallel()
	log, pub := testkit.AuditLog(t) // before the engine: it shuts down first
	e := newEngine(t, conclave.Options{Audit: log})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	run := start(t, e, conclave.RunRequest{Question: "q", HITL: conclave.HITLPlan, Scenario: small(2)})
	next, stop := iter.Pull2(e.Follow(ctx, run))
	defer stop()
	raised := until(t, next, conclave.InterruptRaised).Payload.(*conclave.InterruptRaisedPayload)
	if _, err := e.Steer(ctx, run, conclave.SteerNote{Note: "add a node on costs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(conclave.Resume{InterruptID: raised.InterruptID, Decision: conclave.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	until(t, next, conclave.RunFinished)

	srv := httptest.NewServer(e.APIHandler(func(*http.Request) (conclave.Tenant, error) { return messages.LocalTenant, nil }))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page messages.AuditPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/audit = %d (%v)", resp.StatusCode, err)
	}
	if len(page.Records) != 2 || page.Records[0].Kind != messages.AuditPlanApproval || page.Records[1].Kind != messages.AuditSteeringApplied {
		t.Fatalf("records %+v", page.Records)
	}
	if err := audit.Verify(page.Records, pub); err != nil {
		t.Fatal(err)
	}
}
