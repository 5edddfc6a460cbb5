package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
)

// TestServe_BillingPreflight: `serve --billing-url` against a real HTTP
// billing service. Each start's answer is set by the test: a denial is
// 429 insufficient_budget or 402 tenant_suspended; a check that times out
// is a denial when billing fails closed (the default) and lets the run go
// when it fails open; a denied model turn ends the run with run_error of
// the denial's code.
func TestServe_BillingPreflight(t *testing.T) {
	t.Parallel()
	var start, turn atomic.Pointer[string] // the answers; "hang": wait for the client to give up
	set := func(p *atomic.Pointer[string], s string) { p.Store(&s) }
	billSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req billing.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Tenant != messages.LocalTenant || req.RunID == "" {
			t.Errorf("billing request %+v: %v", req, err)
		}
		answer := *start.Load()
		if req.Stage == billing.StageTurn {
			answer = *turn.Load()
		}
		if answer == "hang" {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(billSrv.Close)
	set(&start, `{"allow": true}`)
	set(&turn, `{"allow": true}`)
	closed := "http://" + startServe(t, 0, nil, "--memory", "--billing-url", billSrv.URL, "--billing-timeout", "1s").base
	open := "http://" + startServe(t, 0, nil, "--memory", "--billing-url", billSrv.URL, "--billing-timeout", "1s", "--billing-fail", "open").base
	run := messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2}}

	refused := func(base string, status int, code string) {
		t.Helper()
		got, body, _ := postRun(t, base, run)
		var eb messages.ErrorBody
		_ = json.Unmarshal(body, &eb)
		if got != status || eb.Error.Code != code {
			t.Fatalf("POST = %d %s, want %d %s", got, body, status, code)
		}
	}
	started := func(base string) string {
		t.Helper()
		got, body, _ := postRun(t, base, run)
		var rc messages.RunCreated
		if err := json.Unmarshal(body, &rc); got != http.StatusCreated || err != nil {
			t.Fatalf("POST = %d %s", got, body)
		}
		return rc.StreamURL
	}

	set(&start, `{"allow": false, "reason": "out of credit"}`)
	refused(closed, http.StatusTooManyRequests, "insufficient_budget")
	set(&start, `{"allow": false, "code": "tenant_suspended", "reason": "unpaid invoice"}`)
	refused(closed, http.StatusPaymentRequired, "tenant_suspended")
	set(&start, "hang")
	refused(closed, http.StatusTooManyRequests, "insufficient_budget")
	set(&turn, "hang")
	if _, end, _ := followRun(t, started(open)); end != messages.RunFinished {
		t.Fatalf("fail open, every check timing out: the run ended with %s", end)
	}

	set(&start, `{"allow": true}`)
	set(&turn, `{"allow": false, "code": "tenant_suspended", "reason": "suspended mid-run"}`)
	if re := runError(t, started(closed)); re.Code != messages.ErrCodeTenantSuspended || !strings.Contains(re.Message, "suspended mid-run") {
		t.Fatalf("a denied turn: run_error %+v", re)
	}
	set(&turn, "hang")
	if re := runError(t, started(closed)); re.Code != messages.ErrCodeInsufficientBudget || !strings.Contains(re.Message, "fails closed") {
		t.Fatalf("a turn check timing out, failing closed: run_error %+v", re)
	}
}

func TestServe_BadBillingFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--billing-url", "ftp://billing"},
		{"--billing-url", "http://billing", "--billing-fail", "maybe"},
		{"--billing-url", "http://billing", "--billing-timeout", "0s"},
	} {
		var stdout, stderr bytes.Buffer
		a := &app{stdout: &stdout, stderr: &stderr, isTTY: func(io.Writer) bool { return false }, now: time.Now}
		if c := execute(context.Background(), a, append([]string{"serve", "--memory", "--addr", "127.0.0.1:0"}, args...)); c != exitUsage {
			t.Fatalf("%v: exit %d, want %d; stderr:\n%s", args, c, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), "invalid --billing-") {
			t.Errorf("%v: stderr = %q", args, stderr.String())
		}
	}
}
