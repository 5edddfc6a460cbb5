package billing_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
)

// billingServer answers every check with answer, after the request it got
// is sent on got (buffered: a test reads it when it wants).
func billingServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, chan billing.Request) {
	t.Helper()
	got := make(chan billing.Request, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req billing.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("billing request %s %v: %v", r.Method, r.Header, err)
		}
		got <- req
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func reply(body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }
}

func TestGate_Check(t *testing.T) {
	t.Parallel()
	// hang answers only once the client gave up (its timeout): no sleep.
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	status := func(code int) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	for _, tc := range []struct {
		name     string
		answer   func(w http.ResponseWriter, r *http.Request)
		failOpen bool
		want     messages.ErrorCode // "": allowed
	}{
		{"allow", reply(`{"allow": true}`), false, ""},
		{"deny suspended", reply(`{"allow": false, "code": "tenant_suspended", "reason": "unpaid invoice"}`), true, billing.CodeTenantSuspended},
		{"deny without a code", reply(`{"allow": false}`), true, billing.CodeInsufficientBudget},
		{"deny with an unknown code", reply(`{"allow": false, "code": "nope"}`), true, billing.CodeInsufficientBudget},
		{"timeout, fail closed", hang, false, billing.CodeInsufficientBudget},
		{"timeout, fail open", hang, true, ""},
		{"500, fail closed", status(500), false, billing.CodeInsufficientBudget},
		{"500, fail open", status(500), true, ""},
		{"not a decision, fail closed", reply(`allow`), false, billing.CodeInsufficientBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, got := billingServer(t, tc.answer)
			g := &billing.Gate{Checker: &billing.HTTPChecker{URL: srv.URL, Timeout: time.Second}, FailOpen: tc.failOpen}
			usd := 0.25
			err := g.Check(t.Context(), billing.Request{Stage: billing.StageRun, Tenant: "acme", RunID: "r1", EstimatedUSD: &usd})
			var d *billing.Denied
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check = %v, want allowed", err)
			case tc.want != "" && (!errors.As(err, &d) || d.Code != tc.want || d.Stage != billing.StageRun):
				t.Fatalf("Check = %v, want denied %s", err, tc.want)
			}
			if req := <-got; req.Tenant != "acme" || req.RunID != "r1" || req.Stage != billing.StageRun || *req.EstimatedUSD != 0.25 {
				t.Errorf("the service got %+v", req)
			}
			if tc.name == "deny suspended" && d.Reason != "unpaid invoice" {
				t.Errorf("reason %q", d.Reason)
			}
		})
	}
}

// TestGate_CheckCallerGaveUp: a check whose caller's context ends is the
// caller's error, not a denial, even failing closed.
func TestGate_CheckCallerGaveUp(t *testing.T) {
	t.Parallel()
	srv, _ := billingServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	g := &billing.Gate{Checker: &billing.HTTPChecker{URL: srv.URL, Timeout: time.Minute}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.Check(ctx, billing.Request{Stage: billing.StageTurn}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Check = %v, want context.Canceled", err)
	}
	var nilGate *billing.Gate
	if err := nilGate.Check(t.Context(), billing.Request{}); err != nil {
		t.Fatalf("a nil gate denied: %v", err)
	}
}
