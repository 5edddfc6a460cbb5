package agui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/agui"
)

// TestHandler_Council: a 20-node council with reasoning, tools and
// sub-agents streams as one valid AG-UI run: one lane per node and
// sub-agent, a step per wave, the task graph kept in step.
func TestHandler_Council(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-council")
	r := h.do(input("thread-council", "run-1", "Why is the sky blue?", map[string]any{
		"scenario": map[string]any{"nodes": 20, "waves": 4, "tokens": 6, "reasoning_tokens": 2, "tools_per_node": 1, "subagents_per_node": 1, "seed": 7},
	}), v)
	if typ := r.last()["type"]; typ != "RUN_FINISHED" {
		t.Fatalf("last event %v: %v", typ, r.last())
	}
	if o := r.outcome(); o["type"] != "success" {
		t.Fatalf("outcome %v", o)
	}
	if got := r.events[0]["runId"]; got != "run-1" {
		t.Fatalf("RUN_STARTED.runId %v", got)
	}
	// 20 nodes + 20 sub-agents + the director.
	if n := r.count("SUBAGENT_STARTED"); n != 41 {
		t.Fatalf("%d SUBAGENT_STARTED, want 41", n)
	}
	if n := r.count("SUBAGENT_FINISHED"); n != 41 {
		t.Fatalf("%d SUBAGENT_FINISHED, want 41", n)
	}
	if n := r.count("STEP_STARTED"); n != 4 {
		t.Fatalf("%d STEP_STARTED, want 4 (one per wave)", n)
	}
	if n := r.count("TOOL_CALL_RESULT"); n != 40 {
		t.Fatalf("%d TOOL_CALL_RESULT, want 40", n)
	}
	for _, typ := range []string{"TEXT_MESSAGE_START", "REASONING_START", "STATE_SNAPSHOT", "STATE_DELTA", "CUSTOM"} {
		if r.count(typ) == 0 {
			t.Errorf("no %s", typ)
		}
	}
	st := v.state.(map[string]any)
	if st["status"] != "finished" {
		t.Fatalf("state status %v", st["status"])
	}
	nodes := st["nodes"].(map[string]any)
	if len(nodes) != 20 {
		t.Fatalf("%d nodes in state", len(nodes))
	}
	for id, n := range nodes {
		if s := n.(map[string]any)["status"]; s != "completed" {
			t.Fatalf("node %s status %v", id, s)
		}
	}
	// Every sub-agent is nested under its node and its delegate call.
	for _, e := range r.events {
		if e["type"] == "SUBAGENT_STARTED" && strings.Contains(e["subagentRunId"].(string), "/sub:") {
			if e["parentSubagentRunId"] == nil || e["parentToolCallId"] == nil {
				t.Fatalf("sub-agent without parent: %v", e)
			}
		}
	}
}

// TestHandler_ParallelInterleave: nodes of a wave stream at once; their
// messages interleave, each with its own messageId and subagentRunId.
func TestHandler_ParallelInterleave(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-par")
	r := h.do(input("thread-par", "run-1", "q", map[string]any{
		"concurrency": 4,
		"scenario":    map[string]any{"nodes": 4, "waves": 1, "tokens": 12, "token_delay_ms": 2},
	}), v)
	if r.last()["type"] != "RUN_FINISHED" {
		t.Fatalf("last %v", r.last())
	}
	// Interleaved: some TEXT_MESSAGE_CONTENT follows content of another message.
	open := map[string]bool{}
	interleaved := false
	for _, e := range r.events {
		switch e["type"] {
		case "TEXT_MESSAGE_START":
			open[e["messageId"].(string)] = true
			if len(open) > 1 {
				interleaved = true
			}
		case "TEXT_MESSAGE_END":
			delete(open, e["messageId"].(string))
		}
	}
	if !interleaved {
		t.Fatal("no two text messages were open at once")
	}
}

// TestHandler_FailingNode: a node failing mid-stream closes its lane with
// SUBAGENT_ERROR; its wave siblings are cancelled; the run ends with
// RUN_ERROR{code:"node_failed"}.
func TestHandler_FailingNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-fail")
	r := h.do(input("thread-fail", "run-1", "q", map[string]any{
		"scenario": map[string]any{"nodes": 6, "waves": 2, "tokens": 8, "fail_nodes": []string{"n002"}},
	}), v)
	last := r.last()
	if last["type"] != "RUN_ERROR" || last["code"] != "node_failed" {
		t.Fatalf("last %v", last)
	}
	var failed bool
	for _, e := range r.events {
		if e["type"] == "SUBAGENT_ERROR" && e["code"] == "node_failed" {
			failed = true
			if !strings.HasSuffix(e["subagentRunId"].(string), "/node:n002") {
				t.Fatalf("failed lane %v", e["subagentRunId"])
			}
		}
	}
	if !failed {
		t.Fatal("no SUBAGENT_ERROR for the failed node")
	}
	nodes := v.state.(map[string]any)["nodes"].(map[string]any)
	if s := nodes["n002"].(map[string]any)["status"]; s != "failed" {
		t.Fatalf("n002 status %v", s)
	}
}

// TestHandler_HITLResume: hitl "tools" with approvals, info requests and
// sub-agents. Every AG-UI run ends with the interrupt outcome until the
// council is done; each resume answers every open interrupt and the same
// Conclave run continues as a new AG-UI run.
func TestHandler_HITLResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-hitl")
	body := input("thread-hitl", "run-1", "q", map[string]any{
		"hitl":     "tools",
		"scenario": map[string]any{"nodes": 3, "waves": 1, "tokens": 4, "approvals": 3, "info_requests": 1, "subagents_per_node": 1},
	})
	r := h.do(body, v)
	run := r.conclaveRunID()
	prevRun := "run-1"
	reasons := map[string]int{}
	for i := 2; r.outcome()["type"] == "interrupt"; i++ {
		if i > 40 {
			t.Fatal("too many interrupt rounds")
		}
		for _, in := range r.interrupts() {
			reasons[in["reason"].(string)]++
			if in["expiresAt"] == nil || in["message"] == nil {
				t.Fatalf("interrupt without expiresAt or message: %v", in)
			}
			if in["reason"] == agui.ReasonToolCall && in["toolCallId"] == nil {
				t.Fatalf("tool_call interrupt without toolCallId: %v", in)
			}
		}
		next := input("thread-hitl", fmt.Sprintf("run-%d", i), "", nil)
		next["resume"] = approveAll(r)
		r = h.do(next, v)
		if got := r.events[0]["parentRunId"]; got != prevRun {
			t.Fatalf("resumed RUN_STARTED.parentRunId %v, want %s", got, prevRun)
		}
		if got := r.conclaveRunID(); got != run {
			t.Fatalf("resume continued run %s, want %s", got, run)
		}
		prevRun = fmt.Sprintf("run-%d", i)
	}
	if o := r.outcome(); r.last()["type"] != "RUN_FINISHED" || o["type"] != "success" {
		t.Fatalf("last %v", r.last())
	}
	for _, reason := range []string{agui.ReasonPlanApproval, agui.ReasonConfirmation, agui.ReasonToolCall, agui.ReasonInputRequired} {
		if reasons[reason] == 0 {
			t.Errorf("no %s interrupt (saw %v)", reason, reasons)
		}
	}
	sum, err := h.engine.Run(messages.LocalTenant, run)
	if err != nil || sum.Status != messages.StatusFinished {
		t.Fatalf("run %v %v", sum.Status, err)
	}
}

// TestHandler_Abort: aborting the Conclave run ends the AG-UI run with
// RUN_ERROR{code:"aborted"}.
func TestHandler_Abort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-abort")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	resp := h.post(ctx, input("thread-abort", "run-1", "q", map[string]any{
		"scenario": map[string]any{"nodes": 4, "waves": 2, "tokens": 200, "token_delay_ms": 5},
	}))
	var once sync.Once
	r := readRun(t, resp, v, func(e map[string]any) {
		if e["type"] == "TEXT_MESSAGE_CONTENT" {
			once.Do(func() {
				run := conclaveRun(v.events[0])
				go func() {
					req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/v1/runs/"+string(run)+"/abort", strings.NewReader(`{"reason":"stop"}`))
					req.Header.Set("Content-Type", "application/json")
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
			})
		}
	})
	last := r.last()
	if last["type"] != "RUN_ERROR" || last["code"] != "aborted" || last["message"] != "stop" {
		t.Fatalf("last %v", last)
	}
}

func conclaveRun(runStarted map[string]any) messages.RunID {
	md := runStarted["metadata"].(map[string]any)["conclave"].(map[string]any)
	return messages.RunID(md["runId"].(string))
}

// TestHandler_ResumeErrors: in-band refusals, and a replayed resume.
func TestHandler_ResumeErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	body := input("thread-err", "run-1", "q", map[string]any{
		"hitl": "tools", "scenario": map[string]any{"nodes": 2, "waves": 1, "tokens": 2, "approvals": 2},
	})
	r := h.do(body, newVerifier("thread-err"))
	if r.outcome()["type"] != "interrupt" {
		t.Fatalf("outcome %v", r.outcome())
	}
	ins := r.interrupts()

	refused := func(body map[string]any, code string) {
		t.Helper()
		x := h.do(body, newVerifier("thread-err"))
		if len(x.events) != 1 || x.last()["type"] != "RUN_ERROR" || x.last()["code"] != code {
			t.Fatalf("want a lone RUN_ERROR %s, got %v", code, x.events)
		}
	}
	// New input while interrupts are pending.
	refused(input("thread-err", "run-x", "another question", nil), "pending_interrupts")
	// A resume that names an unknown interrupt.
	bad := input("thread-err", "run-x", "", nil)
	bad["resume"] = []any{map[string]any{"interruptId": "nope", "status": "resolved"}}
	refused(bad, "invalid_resume")
	// The right interrupt on the wrong thread.
	wrong := input("thread-other", "run-x", "", nil)
	wrong["resume"] = approveAll(r)
	refused(wrong, "invalid_resume")
	// An info-request payload for an approval.
	badPayload := input("thread-err", "run-x", "", nil)
	badPayload["resume"] = []any{map[string]any{"interruptId": ins[0]["id"], "status": "resolved", "payload": "yes"}}
	refused(badPayload, "invalid_resume")

	// The real resume, then its replay: same continuation, nothing answered twice.
	good := input("thread-err", "run-2", "", nil)
	good["resume"] = approveAll(r)
	first := h.do(good, newVerifier("thread-err"))
	again := h.do(good, newVerifier("thread-err"))
	if ft, at := types(first), types(again); ft != at {
		t.Fatalf("replay differs:\nfirst %s\nagain %s", ft, at)
	}
	// The same interrupts answered by another run: refused.
	other := input("thread-err", "run-3", "", nil)
	other["resume"] = approveAll(r)
	refused(other, "invalid_resume")
}

func types(r *aguiRun) string {
	var b strings.Builder
	for _, e := range r.events {
		b.WriteString(e["type"].(string))
		if id, ok := e["subagentRunId"].(string); ok {
			b.WriteString("@" + id[strings.Index(id, "/")+1:])
		}
		b.WriteString(" ")
	}
	return b.String()
}

// TestHandler_BadRequests: errors before the stream are JSON.
func TestHandler_BadRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	ok := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	h.errorBody([]byte(`{`), "application/json", http.StatusBadRequest, "invalid_json")
	h.errorBody([]byte(``), "application/json", http.StatusBadRequest, "invalid_json")
	h.errorBody(ok(input("t1", "r1", "q", nil)), "text/plain", http.StatusUnsupportedMediaType, "unsupported_media_type")
	h.errorBody(ok(input("bad thread!", "r1", "q", nil)), "application/json", http.StatusBadRequest, "bad_request")
	h.errorBody(ok(input("t1", "", "q", nil)), "application/json", http.StatusBadRequest, "bad_request")
	h.errorBody(ok(input("t1", "r1", "", nil)), "application/json", http.StatusUnprocessableEntity, "bad_request")
	h.errorBody(ok(input("t1", "r1", "q", map[string]any{"hitl": "always"})), "application/json", http.StatusBadRequest, "invalid_json")
	h.errorBody(ok(input("t1", "r1", "q", map[string]any{"scenario": map[string]any{"colour": 1}})), "application/json", http.StatusBadRequest, "unknown_field")
	h.errorBody(ok(input("t1", "r1", "q", map[string]any{"scenario": map[string]any{"nodes": -1}})), "application/json", http.StatusUnprocessableEntity, "bad_request")
	resp, err := http.Get(h.srv.URL + "/api/v1/agui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestHandler_Budgets: forwardedProps.budget is the run's budget, as in
// POST /api/v1/runs: above the tenant's tokens_per_run it is 422
// budget_too_large; once the tenant's day is spent a run is 429
// insufficient_budget.
func TestHandler_Budgets(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerRun: 100, TokensPerDay: 1} }}, agui.Config{})
	ok := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	h.errorBody(ok(input("t1", "r1", "q", map[string]any{"budget": map[string]any{"tokens": 101}})), "application/json", http.StatusUnprocessableEntity, "budget_too_large")
	r := h.do(input("t1", "r2", "q", map[string]any{"scenario": map[string]any{"nodes": 1, "tokens": 2}}), newVerifier("t1"))
	if typ := r.last()["type"]; typ != "RUN_ERROR" {
		t.Fatalf("a run over the day's one token: last event %v", r.last())
	}
	h.errorBody(ok(input("t2", "r3", "q", nil)), "application/json", http.StatusTooManyRequests, "insufficient_budget")
}

// TestHandler_BillingDenied: with the billing pre-flight hook (a real
// HTTP billing service), a start it denies is answered as REST answers
// it (429 insufficient_budget, 402 tenant_suspended), and a run whose
// model turn it denies ends with RUN_ERROR of that code.
func TestHandler_BillingDenied(t *testing.T) {
	t.Parallel()
	// The first start is denied for budget, the second for a suspension;
	// later starts are allowed and every model turn is denied.
	var starts atomic.Int32
	billSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req billing.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		answer := `{"allow": true}`
		switch {
		case req.Stage == billing.StageTurn:
			answer = `{"allow": false, "reason": "turn over budget"}`
		case starts.Add(1) == 1:
			answer = `{"allow": false, "reason": "spent"}`
		case starts.Load() == 2:
			answer = `{"allow": false, "code": "tenant_suspended", "reason": "unpaid"}`
		}
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(billSrv.Close)
	h := newHarnessWith(t, actors.Config{Billing: &billing.Gate{Checker: &billing.HTTPChecker{URL: billSrv.URL}}}, agui.Config{})
	ok := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	h.errorBody(ok(input("t-budget", "r1", "q", nil)), "application/json", http.StatusTooManyRequests, "insufficient_budget")
	h.errorBody(ok(input("t-suspend", "r2", "q", nil)), "application/json", http.StatusPaymentRequired, "tenant_suspended")
	r := h.do(input("t-turn", "r3", "q", map[string]any{"scenario": map[string]any{"nodes": 1, "tokens": 2}}), newVerifier("t-turn"))
	if last := r.last(); last["type"] != "RUN_ERROR" || last["code"] != "insufficient_budget" {
		t.Fatalf("a run whose turns are denied: last event %v", last)
	}
}

// TestHandler_Shutdown: Shutdown ends open streams with RUN_ERROR and
// refuses new ones.
func TestHandler_Shutdown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-shut")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	resp := h.post(ctx, input("thread-shut", "run-1", "q", map[string]any{
		"scenario": map[string]any{"nodes": 2, "waves": 1, "tokens": 1000, "token_delay_ms": 5},
	}))
	var once sync.Once
	r := readRun(t, resp, v, func(e map[string]any) {
		if e["type"] == "TEXT_MESSAGE_CONTENT" {
			once.Do(func() { go func() { _ = h.agui.Shutdown(ctx) }() })
		}
	})
	if last := r.last(); last["type"] != "RUN_ERROR" || last["code"] != "shutting_down" {
		t.Fatalf("last %v", last)
	}
	h.errorBody([]byte(`{}`), "application/json", http.StatusServiceUnavailable, "unavailable")
	_ = time.Second
}

// TestHandler_SiblingsSuspended: one node parks while its siblings keep
// streaming past MaxHold: the AG-UI run ends with the interrupt and reports
// the running siblings suspended (no interruptIds); their output continues
// in the next AG-UI run, nothing lost or repeated.
func TestHandler_SiblingsSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{MaxHold: 300 * time.Millisecond})
	v := newVerifier("thread-sib")
	r := h.do(input("thread-sib", "run-1", "q", map[string]any{
		"hitl": "tools", "concurrency": 3,
		"scenario": map[string]any{"nodes": 3, "waves": 1, "tokens": 80, "token_delay_ms": 20, "approvals": 1},
	}), v)
	runningSuspended := false
	deltas := map[string]int{}
	count := func(r *aguiRun) {
		for _, e := range r.events {
			switch e["type"] {
			case "SUBAGENT_FINISHED":
				if o := e["outcome"].(map[string]any); o["type"] == "suspended" && o["interruptIds"] == nil {
					runningSuspended = true
				}
			case "TEXT_MESSAGE_CONTENT":
				if id, ok := e["subagentRunId"].(string); ok {
					deltas[id[strings.Index(id, "/")+1:]]++
				}
			}
		}
	}
	count(r)
	for i := 2; r.outcome()["type"] == "interrupt"; i++ {
		next := input("thread-sib", fmt.Sprintf("run-%d", i), "", nil)
		next["resume"] = approveAll(r)
		r = h.do(next, v)
		count(r)
	}
	if r.outcome()["type"] != "success" {
		t.Fatalf("last %v", r.last())
	}
	if !runningSuspended {
		t.Fatal("no running lane was suspended")
	}
	for _, n := range []string{"node:n001", "node:n002", "node:n003"} {
		if deltas[n] != 80 {
			t.Errorf("%s: %d text deltas across the AG-UI runs, want 80", n, deltas[n])
		}
	}
}

// TestHandler_ExpiredInterrupt: an interrupt that expired while the AG-UI
// run was suspended cannot be answered "resolved" (RUN_ERROR
// interrupt_expired); answered "cancelled", the rest of the run streams.
func TestHandler_ExpiredInterrupt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-exp")
	r := h.do(input("thread-exp", "run-1", "q", map[string]any{
		"hitl": "plan", "approval_timeout_seconds": 1, "scenario": map[string]any{"nodes": 2, "waves": 1},
	}), v)
	ins := r.interrupts()
	if len(ins) != 1 || ins[0]["reason"] != agui.ReasonPlanApproval {
		t.Fatalf("interrupts %v", ins)
	}
	id := ins[0]["id"].(string)
	waitFor(t, "the interrupt to expire", func() bool {
		in, ok := h.engine.Interrupt(messages.LocalTenant, id)
		return ok && in.Status == messages.InterruptTimedOut
	})
	resolved := input("thread-exp", "run-2", "", nil)
	resolved["resume"] = approveAll(r)
	x := h.do(resolved, newVerifier("thread-exp"))
	if len(x.events) != 1 || x.last()["code"] != "interrupt_expired" {
		t.Fatalf("resolved after expiry: %v", x.events)
	}
	cancelled := input("thread-exp", "run-3", "", nil)
	cancelled["resume"] = []any{map[string]any{"interruptId": id, "status": "cancelled"}}
	r = h.do(cancelled, v)
	if last := r.last(); last["type"] != "RUN_ERROR" || last["code"] != "plan_rejected" {
		t.Fatalf("last %v", last)
	}
}

// TestHandler_ResumeWithoutState: a handler that never saw the interrupted
// AG-UI run (its state was evicted, or the server restarted while the
// engine kept the run parked) rebuilds it from the journal and continues.
func TestHandler_ResumeWithoutState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agui.Config{})
	v := newVerifier("thread-lost")
	r := h.do(input("thread-lost", "run-1", "q", map[string]any{
		"hitl": "tools", "scenario": map[string]any{"nodes": 2, "waves": 1, "tokens": 3, "approvals": 2},
	}), v)
	fresh := agui.New(agui.Config{Engine: h.engine})
	srv := httptest.NewServer(fresh)
	defer srv.Close()
	defer func() { _ = fresh.Shutdown(context.Background()) }()
	other := &harness{t: t, engine: h.engine, agui: fresh, srv: srv}
	for i := 2; r.outcome()["type"] == "interrupt"; i++ {
		if i > 20 {
			t.Fatal("too many rounds")
		}
		next := input("thread-lost", fmt.Sprintf("run-%d", i), "", nil)
		next["resume"] = approveAll(r)
		r = other.do(next, v)
		if r.events[0]["type"] != "RUN_STARTED" {
			t.Fatalf("resume refused: %v", r.events)
		}
		if i == 2 { // the fresh handler rebuilt the state; the first one must rebuild it too
			other = h
		}
	}
	if r.outcome()["type"] != "success" {
		t.Fatalf("last %v", r.last())
	}
}
