package actors_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// billingService is a real HTTP billing service that answers each check
// with decide's answer; nil is a hang until the client gives up.
func billingService(t *testing.T, decide func(r billing.Request) *billing.Decision) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req billing.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("billing request: %v", err)
		}
		d := decide(req)
		if d == nil {
			<-r.Context().Done()
			return
		}
		_ = json.NewEncoder(w).Encode(d)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func gate(url string, failOpen bool) *billing.Gate {
	return &billing.Gate{Checker: &billing.HTTPChecker{URL: url, Timeout: 100 * time.Millisecond}, FailOpen: failOpen}
}

// TestBilling_DeniedStart: a run the billing service denies is not
// started: StartRun fails with a QuotaError of the denial's code.
func TestBilling_DeniedStart(t *testing.T) {
	t.Parallel()
	for _, code := range []messages.ErrorCode{messages.ErrCodeTenantSuspended, messages.ErrCodeInsufficientBudget} {
		url := billingService(t, func(r billing.Request) *billing.Decision {
			return &billing.Decision{Allow: r.Stage != billing.StageRun || r.Tenant != "acme", Code: code, Reason: "says billing"}
		})
		e := testkit.NewEngine(t, actors.Config{Billing: gate(url, false)})
		_, err := e.StartRun(t.Context(), messages.StartRun{Tenant: "acme", Question: "q", Scenario: &messages.Scenario{Nodes: 1}})
		var qe *actors.QuotaError
		if !errors.As(err, &qe) || string(qe.Code) != string(code) || qe.Message != "says billing" {
			t.Fatalf("StartRun = %v, want a QuotaError %s", err, code)
		}
		// Another tenant is allowed.
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Tenant: "other", Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2}})
		if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
			t.Fatalf("the other tenant's run: %+v", env.Payload)
		}
	}
}

// TestBilling_DeniedTurn: a turn the billing service denies ends the run
// with the denial's code, whichever agent's turn it was: a worker's, or
// the director's (whose lane would otherwise end the run with
// planning_failed). Each check carries the run's spend so far.
func TestBilling_DeniedTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agent string
		code  messages.ErrorCode
	}{{"n001", messages.ErrCodeInsufficientBudget}, {"director", messages.ErrCodeTenantSuspended}} {
		spent := make(chan int64, 64)
		url := billingService(t, func(r billing.Request) *billing.Decision {
			if r.Stage == billing.StageTurn {
				spent <- r.SpentTokens
			}
			return &billing.Decision{Allow: r.Agent != tc.agent, Code: tc.code, Reason: "out of credit"}
		})
		e := testkit.NewEngine(t, actors.Config{Billing: gate(url, false)})
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Waves: 2, Tokens: 2}})
		testkit.AssertInvariants(t, events)
		p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
		if !ok || p.Code != tc.code || !strings.Contains(p.Message, "out of credit") {
			t.Fatalf("%s denied: terminal %+v, want run_error %s", tc.agent, testkit.Terminal(events, ref.RunID).Payload, tc.code)
		}
		if tc.agent == "n001" {
			if first, second := <-spent, <-spent; first != 0 || second == 0 {
				t.Errorf("spent tokens at the director's and n001's checks: %d, %d; want 0 then the director's", first, second)
			}
		}
	}
}

// TestBilling_FailOpenOrClosed: a billing service that does not answer
// in time (or fails) lets runs go on when billing fails open, and ends
// them with insufficient_budget when it fails closed.
func TestBilling_FailOpenOrClosed(t *testing.T) {
	t.Parallel()
	// The start is allowed; every turn's check hangs past the timeout.
	url := billingService(t, func(r billing.Request) *billing.Decision {
		if r.Stage == billing.StageRun {
			return &billing.Decision{Allow: true}
		}
		return nil
	})
	sc := &messages.Scenario{Nodes: 1, Tokens: 2}
	open := testkit.NewEngine(t, actors.Config{Billing: gate(url, true)})
	ref, events := testkit.RunCouncil(t, open, messages.StartRun{Question: "q", Scenario: sc})
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("fail open: terminal %+v", env.Payload)
	}
	closed := testkit.NewEngine(t, actors.Config{Billing: gate(url, false)})
	ref, events = testkit.RunCouncil(t, closed, messages.StartRun{Question: "q", Scenario: sc})
	p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
	if !ok || p.Code != messages.ErrCodeInsufficientBudget || !strings.Contains(p.Message, "fails closed") {
		t.Fatalf("fail closed: terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
	}
}
