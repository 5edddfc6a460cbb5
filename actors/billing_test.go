package actors_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// gate is the hook of the billing service at url. A check that answers
// has a generous timeout (a loaded test machine); one that hangs (the
// fail-open/closed test) times out after a second.
func gate(url string, failOpen bool, timeout time.Duration) *billing.Gate {
	return &billing.Gate{Checker: &billing.HTTPChecker{URL: url, Timeout: timeout}, FailOpen: failOpen}
}

// TestBilling_DeniedStart: a run the billing service denies is not
// started: StartRun fails with a QuotaError of the denial's code.
func TestBilling_DeniedStart(t *testing.T) {
	t.Parallel()
	for _, code := range []messages.ErrorCode{messages.ErrCodeTenantSuspended, messages.ErrCodeInsufficientBudget} {
		url := billingService(t, func(r billing.Request) *billing.Decision {
			return &billing.Decision{Allow: r.Stage != billing.StageRun || r.Tenant != "acme", Code: code, Reason: "says billing"}
		})
		e := testkit.NewEngine(t, actors.Config{Billing: gate(url, false, testkit.Watchdog)})
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
		e := testkit.NewEngine(t, actors.Config{Billing: gate(url, false, testkit.Watchdog)})
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
	open := testkit.NewEngine(t, actors.Config{Billing: gate(url, true, time.Second)})
	ref, events := testkit.RunCouncil(t, open, messages.StartRun{Question: "q", Scenario: sc})
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("fail open: terminal %+v", env.Payload)
	}
	closed := testkit.NewEngine(t, actors.Config{Billing: gate(url, false, time.Second)})
	ref, events = testkit.RunCouncil(t, closed, messages.StartRun{Question: "q", Scenario: sc})
	p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
	if !ok || p.Code != messages.ErrCodeInsufficientBudget || !strings.Contains(p.Message, "fails closed") {
		t.Fatalf("fail closed: terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
	}
}

// TestBilling_DaySpentDeniesTurn: the quota file's day budget is checked
// before each model turn too: a run parked on its plan gate while its
// tenant's day budget becomes spent gets its next turn denied, and ends
// with insufficient_budget, without calling the model again. (Before,
// the turn ran: this run's meter had no day budget when it started, and
// it finished.)
func TestBilling_DaySpentDeniesTurn(t *testing.T) {
	t.Parallel()
	var perDay atomic.Int64
	e := testkit.NewEngine(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerDay: perDay.Load()} }})
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1, Tokens: 2}},
		func(*messages.InterruptRaisedPayload) messages.Resume {
			perDay.Store(e.TenantSpend(messages.LocalTenant).Tokens) // the director's turn spent the day
			return messages.Resume{Decision: messages.DecisionApprove}
		})
	testkit.AssertInvariants(t, events)
	p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
	if !ok || p.Code != messages.ErrCodeInsufficientBudget || !strings.Contains(p.Message, "(tokens_per_day); it is reset at midnight UTC") {
		t.Fatalf("terminal %+v, want run_error insufficient_budget", testkit.Terminal(events, ref.RunID).Payload)
	}
	if n := testkit.Count(events, messages.TokenUsage); n != 1 {
		t.Errorf("%d token_usage, want the director's only", n)
	}
}
