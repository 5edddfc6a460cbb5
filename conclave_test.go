package conclave_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/pricing"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/fetch"
	"github.com/conclave-ai/conclave/tool/workspace"
)

// newEngine starts an engine for t and shuts it down when the test ends.
func newEngine(t testing.TB, opts conclave.Options) *conclave.Engine {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testkit.TestLogger(t, slog.LevelWarn)
	}
	e, err := conclave.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e
}

// follow collects a run's events with Engine.Follow.
func follow(t testing.TB, e *conclave.Engine, run conclave.RunRef) []*conclave.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	var out []*conclave.Envelope
	for ev, err := range e.Follow(ctx, run) {
		if err != nil {
			t.Fatalf("Follow %s: %v (after %d events)", run.RunID, err, len(out))
		}
		out = append(out, ev)
	}
	return out
}

func start(t testing.TB, e *conclave.Engine, req conclave.RunRequest) conclave.RunRef {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	run, err := e.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return run
}

// until pulls events from next up to the first of type typ.
func until(t testing.TB, next func() (*conclave.Envelope, error, bool), typ conclave.EventType) *conclave.Envelope {
	t.Helper()
	for {
		ev, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("no %s event (err %v)", typ, err)
		}
		if ev.Type == typ {
			return ev
		}
	}
}

func small(nodes int) *conclave.Scenario {
	return &conclave.Scenario{Nodes: nodes, Tokens: 2, SynthesisTokens: 2}
}

// toolModel plans one node, n1, allowed the tools calls names. Its worker
// makes calls in its first turn and, in its second, answers with the
// results it got; the synthesiser answers "done".
type toolModel struct{ calls []model.ToolCall }

func (toolModel) Name() string { return "tool-model" }

func (m toolModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	var out []model.Chunk
	switch req.Role {
	case model.RoleDirector:
		plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "n1", Goal: "use the tools"}}}
		for _, c := range m.calls {
			if c.Name != model.ToolSearch { // a plan naming a tool the engine lacks is invalid
				plan.Nodes[0].Tools = append(plan.Nodes[0].Tools, c.Name)
			}
		}
		b, _ := json.Marshal(plan)
		out = append(out, &model.Text{Text: string(b)})
	case model.RoleWorker:
		if req.Turn == 1 && len(m.calls) > 0 {
			for _, c := range m.calls {
				out = append(out, &model.Call{Call: c})
			}
			break
		}
		var results []string
		for _, r := range req.ToolResults {
			results = append(results, r.Content)
		}
		out = append(out, &model.Text{Text: "results: " + strings.Join(results, "; ")})
	case model.RoleSynthesizer:
		out = append(out, &model.Text{Text: "done"})
	default:
		return nil, model.ErrModel
	}
	return &chunks{ctx: ctx, next: out}, nil
}

func toolResults(events []*conclave.Envelope) []*messages.ToolCallFinishedPayload {
	var out []*messages.ToolCallFinishedPayload
	for _, ev := range events {
		if p, ok := ev.Payload.(*messages.ToolCallFinishedPayload); ok {
			out = append(out, p)
		}
	}
	return out
}

func terminal(t testing.TB, events []*conclave.Envelope) *conclave.Envelope {
	t.Helper()
	if len(events) == 0 || !events[len(events)-1].Type.Terminal() {
		t.Fatalf("the events do not end with a terminal event")
	}
	return events[len(events)-1]
}

type query struct {
	Query string `json:"query"`
}

func TestNew_InvalidOptions(t *testing.T) {
	t.Parallel()
	echo, err := tool.Func("echo", "echoes", func(_ context.Context, q query) (string, error) { return q.Query, nil })
	if err != nil {
		t.Fatal(err)
	}
	delegate, err := tool.Func(model.ToolDelegate, "not the runtime's", func(_ context.Context, q query) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]conclave.Options{
		"Model and Models":                  {Model: toolModel{}, Models: func(conclave.Scenario) (model.Model, error) { return toolModel{}, nil }},
		"KeepRunsOnShutdown and no Journal": {KeepRunsOnShutdown: true},
		"a tool twice":                      {Tools: []tool.Tool{echo, echo}},
		"a runtime tool":                    {Tools: []tool.Tool{delegate}},
		"FileURLs without a prefix":         {FileURLs: &fetch.FilesConfig{}},
		"an unknown supervision strategy":   {Supervision: &conclave.Supervision{Team: &conclave.SupervisionPolicy{Strategy: "sometimes"}}},
		"a billing URL that is not http":    {Billing: &conclave.BillingOptions{URL: "ftp://billing"}},
	} {
		if _, err := conclave.New(opts); !errors.Is(err, conclave.ErrInvalidOptions) {
			t.Errorf("%s: New = %v, want ErrInvalidOptions", name, err)
		}
	}
}

// TestNew_ScriptedSearchByDefault: the scripted model comes with its
// search tool; Options.Tools adds to it.
func TestNew_ScriptedSearchByDefault(t *testing.T) {
	t.Parallel()
	echo, err := tool.Func("echo", "echoes", func(_ context.Context, q query) (string, error) { return q.Query, nil })
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, conclave.Options{Tools: []tool.Tool{echo}})
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 2, ToolsPerNode: 1}}))
	res := toolResults(events)
	if len(res) != 2 || res[0].IsError || res[1].IsError {
		t.Fatalf("tool results %+v, want two of the scripted search", res)
	}
	if terminal(t, events).Type != conclave.RunFinished {
		t.Fatalf("terminal %s", terminal(t, events).Type)
	}
}

// TestNew_CustomModelTools: with a model of the program's own there is no
// scripted search: a call of it is an error result the model reads; the
// program's tools answer.
func TestNew_CustomModelTools(t *testing.T) {
	t.Parallel()
	echo, err := tool.Func("echo", "echoes", func(_ context.Context, q query) (string, error) { return "echo " + q.Query, nil })
	if err != nil {
		t.Fatal(err)
	}
	calls := []model.ToolCall{
		{ID: "c1", Name: model.ToolSearch, Args: json.RawMessage(`{"query":"sky"}`)},
		{ID: "c2", Name: "echo", Args: json.RawMessage(`{"query":"sky"}`)},
	}
	e := newEngine(t, conclave.Options{Model: toolModel{calls: calls}, Tools: []tool.Tool{echo}})
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q"}))
	res := toolResults(events)
	if len(res) != 2 || !res[0].IsError || !strings.Contains(res[0].Result, "unknown tool") || res[1].IsError || res[1].Result != "echo sky" {
		t.Fatalf("tool results %+v, want search unknown and echo's answer", res)
	}
	if fin, ok := terminal(t, events).Payload.(*conclave.RunFinishedPayload); !ok || fin.Answer != "done" {
		t.Fatalf("terminal %+v", terminal(t, events).Payload)
	}
}

// TestNew_Models: a factory builds each run's model from its scenario.
func TestNew_Models(t *testing.T) {
	t.Parallel()
	var seeds []int64
	e := newEngine(t, conclave.Options{Models: func(s conclave.Scenario) (model.Model, error) {
		seeds = append(seeds, s.Seed) // runs start one at a time here
		return toolModel{}, nil
	}})
	seed := int64(7)
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Seed: &seed}))
	if terminal(t, events).Type != conclave.RunFinished || len(seeds) != 1 || seeds[0] != 7 {
		t.Fatalf("terminal %s, the factory saw seeds %v", terminal(t, events).Type, seeds)
	}
}

// TestNew_Supervision: Options.Supervision is the engine's: with workers
// on stop, a panicking worker is not restarted and its run fails; a run's
// own choice applies over it.
func TestNew_Supervision(t *testing.T) {
	t.Parallel()
	e := newEngine(t, conclave.Options{Supervision: &conclave.Supervision{Worker: &conclave.SupervisionPolicy{Strategy: conclave.SupervisionStop}}})
	sc := &conclave.Scenario{Nodes: 1, Tokens: 4, PanicNodes: conclave.NodeSelector{IDs: []string{"n001"}}}
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Scenario: sc}))
	if terminal(t, events).Type != conclave.RunError {
		t.Fatalf("terminal %s, want run_error (worker=stop)", terminal(t, events).Type)
	}
	sup, err := conclave.ParseSupervision("worker=restart")
	if err != nil {
		t.Fatal(err)
	}
	events = follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Scenario: sc, Supervision: sup}))
	if terminal(t, events).Type != conclave.RunFinished {
		t.Fatalf("terminal %s, want run_finished (the run chose worker=restart)", terminal(t, events).Type)
	}
	if p := events[0].Payload.(*conclave.RunStartedPayload); p.Supervision.String() != "worker=one-for-one" {
		t.Errorf("run_started supervision %q", p.Supervision.String())
	}
}

// TestNew_Billing: Options.Billing asks a billing service (here a real
// HTTP one, which checks the Authorization header) before a run starts:
// a denial is a *QuotaError with the service's code and reason.
func TestNew_Billing(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer b" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"allow": false, "code": "tenant_suspended", "reason": "unpaid"}`))
	}))
	t.Cleanup(srv.Close)
	e := newEngine(t, conclave.Options{Billing: &conclave.BillingOptions{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer b"}}}})
	_, err := e.Start(t.Context(), conclave.RunRequest{Question: "q"})
	var qe *conclave.QuotaError
	if !errors.As(err, &qe) || qe.Code != "tenant_suspended" || qe.Message != "unpaid" {
		t.Fatalf("Start = %v, want a QuotaError tenant_suspended", err)
	}
}

// TestEngine_FollowOneRun: Follow yields one run's events, from its
// run_started to its terminal event, and leaves out the session's other
// runs; a RunRef without its session works too.
func TestEngine_FollowOneRun(t *testing.T) {
	t.Parallel()
	e := newEngine(t, conclave.Options{})
	first := start(t, e, conclave.RunRequest{Question: "one", Scenario: small(1)})
	follow(t, e, first)
	second := start(t, e, conclave.RunRequest{Question: "two", SessionID: first.SessionID, Scenario: small(1)})
	if second.SessionID != first.SessionID {
		t.Fatalf("second run in session %s, want %s", second.SessionID, first.SessionID)
	}
	for _, ref := range []conclave.RunRef{second, {RunID: second.RunID}} {
		events := follow(t, e, ref)
		if events[0].Type != conclave.RunStarted || terminal(t, events).Type != conclave.RunFinished {
			t.Fatalf("Follow(%+v) from %s to %s", ref, events[0].Type, terminal(t, events).Type)
		}
		for i, ev := range events {
			if ev.RunID != second.RunID || (i > 0 && ev.Seq != events[i-1].Seq+1) {
				t.Fatalf("Follow(%+v) yielded seq %d of run %s after seq %d", ref, ev.Seq, ev.RunID, events[max(i-1, 0)].Seq)
			}
		}
	}
	if _, err := e.Run(conclave.RunRef{RunID: "nope"}); !errors.Is(err, conclave.ErrRunNotFound) {
		t.Fatalf("Run of an unknown run = %v", err)
	}
	for _, err := range e.Follow(context.Background(), conclave.RunRef{RunID: "nope"}) {
		if !errors.Is(err, conclave.ErrRunNotFound) {
			t.Fatalf("Follow of an unknown run = %v", err)
		}
	}
}

// TestEngine_EventsEnds: a session's events go on until ctx ends, or
// until the engine shut down and everything was yielded.
func TestEngine_EventsEnds(t *testing.T) {
	t.Parallel()
	e := newEngine(t, conclave.Options{})
	run := start(t, e, conclave.RunRequest{Question: "q", HITL: conclave.HITLPlan, Scenario: small(1)})

	ctx, cancel := context.WithCancel(context.Background())
	next, stop := iter.Pull2(e.Events(ctx, run.Tenant, run.SessionID, 0))
	defer stop()
	until(t, next, conclave.InterruptRaised)
	cancel()
	if _, err, _ := next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v, want context.Canceled", err)
	}

	next2, stop2 := iter.Pull2(e.Events(context.Background(), run.Tenant, run.SessionID, 0))
	defer stop2()
	until(t, next2, conclave.InterruptRaised)
	sctx, scancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer scancel()
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	end := until(t, next2, conclave.RunError)
	if p := end.Payload.(*conclave.RunErrorPayload); p.Code != messages.ErrCodeInterrupted {
		t.Fatalf("run ended with %s", p.Code)
	}
	if _, err, _ := next2(); !errors.Is(err, conclave.ErrShuttingDown) {
		t.Fatalf("after shutdown: %v, want ErrShuttingDown", err)
	}
	if _, err := e.Start(sctx, conclave.RunRequest{Question: "q"}); !errors.Is(err, conclave.ErrShuttingDown) {
		t.Fatalf("Start after Shutdown = %v", err)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Done is open after Shutdown")
	}
	if err := e.Shutdown(sctx); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

// TestEngine_ResumeSteerRuns: a run parked on its plan takes a steering
// note and carries on once the plan is approved; Runs lists it.
func TestEngine_ResumeSteerRuns(t *testing.T) {
	t.Parallel()
	e := newEngine(t, conclave.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	run := start(t, e, conclave.RunRequest{Question: "q", HITL: conclave.HITLPlan, Scenario: small(2)})
	next, stop := iter.Pull2(e.Follow(ctx, run))
	defer stop()
	raised := until(t, next, conclave.InterruptRaised).Payload.(*conclave.InterruptRaisedPayload)

	if _, err := e.Resume(conclave.Resume{InterruptID: "nope", Decision: conclave.DecisionApprove}); !errors.Is(err, conclave.ErrInterruptNotFound) {
		t.Fatalf("Resume of an unknown interrupt = %v", err)
	}
	id, err := e.Steer(ctx, run, conclave.SteerNote{Note: "add a node on costs"})
	if err != nil || id == "" {
		t.Fatalf("Steer = %q, %v", id, err)
	}
	if _, err := e.Resume(conclave.Resume{InterruptID: raised.InterruptID, Decision: conclave.DecisionApprove}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	until(t, next, messages.SteeringApplied)
	until(t, next, conclave.RunFinished)

	runs, cursor, err := e.Runs(ctx, conclave.RunFilter{}) // no Limit: the default page
	if err != nil || len(runs) != 1 || runs[0].RunID != run.RunID || cursor != "" {
		t.Fatalf("Runs = %+v, %q, %v", runs, cursor, err)
	}
	if sum, err := e.Run(run); err != nil || sum.Status != messages.StatusFinished {
		t.Fatalf("Run = %+v, %v", sum, err)
	}
	if _, err := e.Steer(ctx, run, conclave.SteerNote{Note: "late"}); !errors.Is(err, conclave.ErrRunTerminal) {
		t.Fatalf("Steer of an ended run = %v", err)
	}
	rewound, err := e.Rewind(ctx, run, 1, "again")
	if err != nil {
		t.Fatalf("Rewind: %v", err)
	}
	if events := follow(t, e, rewound); terminal(t, events).Type != conclave.RunFinished {
		t.Fatalf("the rewound run ended with %s", terminal(t, events).Type)
	}
}

// blocking is a search tool that blocks until its call is cancelled.
func blocking(t testing.TB, started chan<- struct{}) tool.Tool {
	t.Helper()
	tl, err := tool.Func(model.ToolSearch, "blocks", func(ctx context.Context, _ query) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestEngine_AbortEndsABlockedTool: a tool that blocks for ever is
// cancelled by an abort, and the run ends at once (virtual time).
func TestEngine_AbortEndsABlockedTool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 1)
		e := newEngine(t, conclave.Options{Tools: []tool.Tool{blocking(t, started)}})
		run := start(t, e, conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 1, ToolsPerNode: 1}})
		<-started
		begin := time.Now()
		if err := e.Abort(context.Background(), run, "enough"); err != nil {
			t.Fatal(err)
		}
		events := follow(t, e, run)
		if waited := time.Since(begin); waited >= time.Second {
			t.Fatalf("the run ended %v after the abort", waited)
		}
		if p, ok := terminal(t, events).Payload.(*conclave.RunErrorPayload); !ok || p.Code != messages.ErrCodeAborted {
			t.Fatalf("terminal %+v", terminal(t, events).Payload)
		}
		if err := e.Abort(context.Background(), run, "again"); !errors.Is(err, conclave.ErrRunTerminal) {
			t.Fatalf("second Abort = %v", err)
		}
	})
}

// TestEngine_ShutdownEndsABlockedTool: Shutdown ends a run whose tool
// blocks, within its deadline (TestMain checks that nothing is left).
func TestEngine_ShutdownEndsABlockedTool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 1)
		e, err := conclave.New(conclave.Options{Tools: []tool.Tool{blocking(t, started)}})
		if err != nil {
			t.Fatal(err)
		}
		start(t, e, conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 1, ToolsPerNode: 1}})
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	})
}

// TestEngine_KeepRunsOnShutdown: with a durable journal, a run parked on
// its plan survives the engine: the next engine on the journal has it
// parked on the same interrupt. The journal is the test's to close.
func TestEngine_KeepRunsOnShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := conclave.OpenJournal(dir, conclave.JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := conclave.OpenJournal(dir, conclave.JournalOptions{}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("a second OpenJournal of the directory = %v, want journal.ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()

	first, err := conclave.New(conclave.Options{Journal: j, KeepRunsOnShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	run := start(t, first, conclave.RunRequest{Question: "q", HITL: conclave.HITLPlan, Scenario: small(1)})
	next, stop := iter.Pull2(first.Follow(ctx, run))
	raised := until(t, next, conclave.InterruptRaised).Payload.(*conclave.InterruptRaisedPayload)
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err, _ := next(); !errors.Is(err, conclave.ErrShuttingDown) {
		t.Fatalf("Follow of a frozen run after Shutdown: %v, want ErrShuttingDown", err)
	}
	stop()

	second := newEngine(t, conclave.Options{Journal: j})
	if _, err := second.Resume(conclave.Resume{InterruptID: raised.InterruptID, Decision: conclave.DecisionApprove}); err != nil {
		t.Fatalf("Resume on the next engine: %v", err)
	}
	if events := follow(t, second, run); terminal(t, events).Type != conclave.RunFinished {
		t.Fatalf("the run ended with %s", terminal(t, events).Type)
	}
	if err := second.Shutdown(ctx); err != nil { // before the deferred Close
		t.Fatal(err)
	}
}

// tenantHeader is an Authenticate: the tenant is the X-Tenant header.
func tenantHeader(r *http.Request) (conclave.Tenant, error) {
	if t := r.Header.Get("X-Tenant"); t != "" {
		return conclave.Tenant(t), nil
	}
	return "", errors.New("who are you?")
}

// TestEngine_Handlers: each handler answers with its own Authenticate,
// and Shutdown ends the streams they serve.
func TestEngine_Handlers(t *testing.T) {
	t.Parallel()
	e, err := conclave.New(conclave.Options{Logger: testkit.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	asAcme := func(*http.Request) (conclave.Tenant, error) { return "acme", nil }
	mux := http.NewServeMux()
	mux.Handle(conclave.APIPath, e.APIHandler(asAcme))
	mux.Handle(conclave.SSEPath, e.SSEHandler(tenantHeader))
	mux.Handle(conclave.WebSocketPath, e.WebSocketHandler(tenantHeader))
	mux.Handle(conclave.AGUIPath, e.AGUIHandler(tenantHeader))
	mux.Handle(conclave.A2ARPCPath, e.A2AHandler(tenantHeader))
	mux.Handle(conclave.A2ACardPath, e.A2AHandler(tenantHeader))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()

	resp, err := http.Post(srv.URL+"/api/v1/runs", "application/json", strings.NewReader(`{"question":"q","hitl":"plan"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created messages.RunCreated
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/runs = %d (%v)", resp.StatusCode, err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(created.StreamURL, srv.URL+conclave.SSEPath+"?") {
		t.Fatalf("stream_url %s", created.StreamURL)
	}
	if _, err := e.Run(conclave.RunRef{Tenant: "acme", RunID: created.RunID}); err != nil {
		t.Fatalf("the API's run is not acme's: %v", err)
	}
	get := func(url, tenant string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if tenant != "" {
			req.Header.Set("X-Tenant", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for tenant, want := range map[string]int{"": http.StatusUnauthorized, "other": http.StatusNotFound} {
		resp := get(created.StreamURL, tenant)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("SSE as %q = %d, want %d", tenant, resp.StatusCode, want)
		}
	}
	if resp := get(srv.URL+conclave.A2ACardPath, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("agent card = %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}

	// Two streams that would stay open for ever: SSE and WebSocket.
	sse := get(created.StreamURL, "acme")
	defer sse.Body.Close()
	if sse.StatusCode != http.StatusOK {
		t.Fatalf("SSE as acme = %d", sse.StatusCode)
	}
	ws, wsResp, err := (&websocket.Dialer{HandshakeTimeout: testkit.Watchdog}).DialContext(ctx, created.WSURL, http.Header{"X-Tenant": {"acme"}})
	if err != nil {
		t.Fatalf("WebSocket: %v", err)
	}
	defer ws.Close()
	wsResp.Body.Close()

	// Both streams deliver before the shutdown: a stream still starting
	// while the server shuts down may end without its final frame.
	lines := bufio.NewScanner(sse.Body)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "event: ") {
	}
	if _, _, err := ws.ReadMessage(); err != nil {
		t.Fatal(err)
	}

	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var types []string
	for lines.Scan() {
		if typ, ok := strings.CutPrefix(lines.Text(), "event: "); ok {
			types = append(types, typ)
		}
	}
	if n := len(types); n < 2 || types[n-2] != "run_error" || types[n-1] != "stream_closed" {
		t.Errorf("the SSE stream ended with %v (%v)", types[max(0, len(types)-2):], lines.Err())
	}
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) && !errors.Is(err, io.EOF) {
				t.Errorf("the WebSocket ended with %v, want a close frame", err)
			}
			break
		}
	}
}

// TestNew_BuiltinTools: Options.Fetch and Options.Workspace add the
// built-in tools; a scenario's calls name them. An invalid configuration
// is ErrInvalidOptions.
func TestNew_BuiltinTools(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("blue light scatters"))
	}))
	t.Cleanup(srv.Close)
	ap := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	dir := t.TempDir()
	e := newEngine(t, conclave.Options{Fetch: &fetch.Config{Allow: []netip.AddrPort{ap}, DefaultURL: srv.URL + "/sky"},
		Workspace: &workspace.Config{Dir: dir}})
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 1, Calls: []string{"fetch", "workspace.write"}}}))
	res := toolResults(events)
	if len(res) != 2 || res[0].IsError || !strings.HasSuffix(res[0].Result, "blue light scatters") || res[1].IsError {
		t.Fatalf("tool results %+v", res)
	}
	files := 0
	for _, ev := range events {
		if _, ok := ev.Payload.(*messages.FilePayload); ok {
			files++
		}
	}
	if fin, ok := terminal(t, events).Payload.(*conclave.RunFinishedPayload); !ok || files != 1 || len(fin.Citations) != 1 || fin.Citations[0].URL != srv.URL+"/sky" {
		t.Fatalf("terminal %+v, %d file events", terminal(t, events).Payload, files)
	}
	for name, opts := range map[string]conclave.Options{
		"a fetch default url that is not http": {Fetch: &fetch.Config{DefaultURL: "ftp://x"}},
		"a workspace without a directory":      {Workspace: &workspace.Config{}},
	} {
		if _, err := conclave.New(opts); !errors.Is(err, conclave.ErrInvalidOptions) {
			t.Errorf("%s: New = %v, want ErrInvalidOptions", name, err)
		}
	}
}

// TestNew_PricesAndCostBudget: Options.Prices prices the runs' model
// turns, so that a cost budget (here a run's own, under the tenant's
// cost_per_run) ends the run with budget_exceeded; the run's summary
// shows its cost and budget.
func TestNew_PricesAndCostBudget(t *testing.T) {
	t.Parallel()
	prices, err := pricing.New(map[string]pricing.Price{"scripted": {Input: 1000, Output: 1000}}) // a tenth of a cent a token
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, conclave.Options{Prices: prices, Limits: func(conclave.Tenant) conclave.Limits { return conclave.Limits{CostPerRun: 10} }})
	ref := start(t, e, conclave.RunRequest{Question: "q", Scenario: small(3), Budget: &conclave.RunBudget{CostUSD: 0.001}})
	events := follow(t, e, ref)
	end, ok := terminal(t, events).Payload.(*messages.RunErrorPayload)
	if !ok || end.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(end.Message, "budget.cost_usd") {
		t.Fatalf("terminal %+v, want run_error budget_exceeded for the run's budget.cost_usd", terminal(t, events).Payload)
	}
	sum, err := e.Run(ref)
	if err != nil {
		t.Fatal(err)
	}
	if sum.CostUSD == nil || *sum.CostUSD <= 0.001 || sum.Budget == nil || sum.Budget.CostUSD != 0.001 {
		t.Fatalf("summary cost %v budget %+v", sum.CostUSD, sum.Budget)
	}
}

// TestNew_FileURLs: with Options.FileURLs a run's file by URL under the
// prefix is fetched into run_started; without it the run is refused.
func TestNew_FileURLs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "the brief")
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	req := conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 1, Tokens: 2},
		Files: []conclave.InputFile{{Name: "brief.txt", URL: srv.URL + "/pub/brief.txt"}}}
	e := newEngine(t, conclave.Options{FileURLs: &fetch.FilesConfig{Prefixes: []string{srv.URL + "/pub/"}, Allow: []netip.AddrPort{ap}}})
	events := follow(t, e, start(t, e, req))
	st := events[0].Payload.(*conclave.RunStartedPayload)
	if len(st.Files) != 1 || string(st.Files[0].Data) != "the brief" {
		t.Fatalf("run_started files %+v", st.Files)
	}
	_, err := newEngine(t, conclave.Options{}).Start(t.Context(), req)
	var fe *messages.FileError
	if !errors.As(err, &fe) || fe.Code != messages.FileURLNotAllowed {
		t.Fatalf("without FileURLs: %v, want file_url_not_allowed", err)
	}
}

// TestNew_Remote: Options.Remote reaches the engine: a node naming an
// agent registered as unavailable fails with the registration's reason
// (without the option it would be an unknown agent).
func TestNew_Remote(t *testing.T) {
	t.Parallel()
	var reg remote.Registry
	if err := reg.Add("helper", nil, errors.New("card refused")); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, conclave.Options{Remote: &reg})
	events := follow(t, e, start(t, e, conclave.RunRequest{Question: "q", Scenario: &conclave.Scenario{Nodes: 1,
		Remote: &conclave.RemoteScenario{Agent: "helper", Nodes: conclave.NodeSelector{IDs: []string{"n001"}}}}}))
	for _, ev := range events {
		if p, ok := ev.Payload.(*conclave.NodeFailedPayload); ok {
			if !strings.Contains(p.Error, `remote: agent unavailable: "helper": card refused`) {
				t.Fatalf("node_failed: %s", p.Error)
			}
			return
		}
	}
	t.Fatal("no node_failed")
}
