package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
)

// searchTool is a "search" tool (the one the scripted workers call) with
// a test's own behaviour.
type searchTool struct {
	timeout time.Duration
	call    func(ctx context.Context, query string) (tool.Result, error)
}

func (s searchTool) Def() tool.Def {
	return tool.Def{Name: model.ToolSearch, Timeout: s.timeout,
		Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}
}

func (s searchTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct{ Query string }
	_ = json.Unmarshal(args, &in)
	return s.call(ctx, in.Query)
}

func toolSet(t *testing.T, tools ...tool.Tool) *tool.Set {
	t.Helper()
	s, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// blockForever blocks until its call is cancelled.
func blockForever(started chan<- struct{}) func(ctx context.Context, _ string) (tool.Result, error) {
	return func(ctx context.Context, _ string) (tool.Result, error) {
		if started != nil {
			started <- struct{}{}
		}
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}
}

// TestTools_AbortCancelsABlockedTool: a tool that blocks until cancelled
// does not hold its agent (the agent's mailbox stays free, the run
// answers an abort at once) and the abort cancels it: the run ends with
// no virtual time passing, long before the tool's timeout.
func TestTools_AbortCancelsABlockedTool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 4)
		e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, searchTool{call: blockForever(started)})})
		ctx := context.Background()
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Waves: 1, ToolsPerNode: 1}})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		<-started
		begin := time.Now()
		if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID, Reason: "enough"}); err != nil {
			t.Fatal(err)
		}
		events, err := testkit.Follow(ctx, e, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(begin); waited >= time.Second {
			t.Fatalf("the run ended %v after the abort (the tool was not cancelled)", waited)
		}
		testkit.AssertInvariants(t, events)
		if p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeAborted {
			t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
		}
	})
}

// TestTools_ShutdownCancelsABlockedTool: shutdown ends a run whose tool
// blocks, within its deadline, and leaves no goroutine (TestMain checks).
func TestTools_ShutdownCancelsABlockedTool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 1)
		e, err := actors.New(actors.Config{Tools: toolSet(t, searchTool{call: blockForever(started)})})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 1}}); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		testkit.SettleDeadLetters()
	})
}

// TestTools_TimeoutIsAnErrorResult: a call past its tool's timeout gets
// an error result; the node and the run go on.
func TestTools_TimeoutIsAnErrorResult(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, searchTool{timeout: 3 * time.Second, call: blockForever(nil)})})
		begin := time.Now()
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 1}})
		testkit.AssertInvariants(t, events)
		if got := time.Since(begin); got != 3*time.Second {
			t.Fatalf("the run took %v of virtual time, want the tool's timeout, 3s", got)
		}
		fin := toolFinished(events)
		if len(fin) != 1 || !fin[0].IsError || !strings.Contains(fin[0].Result, "timed out") {
			t.Fatalf("results %+v", fin)
		}
		if testkit.Terminal(events, ref.RunID).Type != messages.RunFinished {
			t.Fatal("the run did not finish")
		}
	})
}

// TestTools_ParallelBoundedAndInCallOrder: the calls of one turn run at
// once, at most ToolParallel of them; their results are published in
// call order whatever order they finish in.
func TestTools_ParallelBoundedAndInCallOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var inFlight, peak atomic.Int32
	gates := map[string]chan struct{}{}
	gate := func(q string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[q] == nil {
			gates[q] = make(chan struct{})
		}
		return gates[q]
	}
	calls := make(chan string, 8)
	e := testkit.NewEngine(t, actors.Config{ToolParallel: 2, Tools: toolSet(t, searchTool{call: func(ctx context.Context, q string) (tool.Result, error) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		calls <- q
		select {
		case <-gate(q):
		case <-ctx.Done():
		}
		inFlight.Add(-1)
		return tool.Result{Content: "result of " + q}, nil
	}})})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 3}})
	if err != nil {
		t.Fatal(err)
	}
	// Two calls run at once; the third waits. Release the second first.
	first, second := <-calls, <-calls
	select {
	case q := <-calls:
		t.Fatalf("a third call (%s) ran while two were running", q)
	default:
	}
	close(gate(second))
	third := <-calls
	close(gate(third))
	close(gate(first))
	events, err := testkit.Follow(ctx, e, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, events)
	if peak.Load() != 2 {
		t.Fatalf("peak concurrency %d, want 2", peak.Load())
	}
	var started []string
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallStartedPayload); ok {
			started = append(started, p.CallID)
		}
	}
	fin := toolFinished(events)
	if len(fin) != 3 {
		t.Fatalf("%d results", len(fin))
	}
	for i, f := range fin {
		if f.CallID != started[i] || f.IsError {
			t.Fatalf("result %d is %+v; calls in order %v", i, f, started)
		}
	}
}

// TestTools_InvalidArgumentsAreAnErrorResult: a call whose arguments do
// not match the tool's schema does not run; the model gets why.
func TestTools_InvalidArgumentsAreAnErrorResult(t *testing.T) {
	t.Parallel()
	var ran atomic.Bool
	strict := searchTool{call: func(context.Context, string) (tool.Result, error) { ran.Store(true); return tool.Result{}, nil }}
	e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, schemaTool{strict, `{"type":"object","properties":{"query":{"type":"integer"}},"required":["query"]}`})})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 1}})
	testkit.AssertInvariants(t, events)
	fin := toolFinished(events)
	if len(fin) != 1 || !fin[0].IsError || !strings.Contains(fin[0].Result, "invalid arguments") || ran.Load() {
		t.Fatalf("results %+v (ran %v)", fin, ran.Load())
	}
	if testkit.Terminal(events, ref.RunID).Type != messages.RunFinished {
		t.Fatal("the run did not finish")
	}
}

// TestTools_PanicIsAnErrorResult: a tool that panics fails its call, not
// the process nor the agent.
func TestTools_PanicIsAnErrorResult(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, searchTool{call: func(context.Context, string) (tool.Result, error) {
		panic(errors.New("boom"))
	}})})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 1}})
	fin := toolFinished(events)
	if len(fin) != 1 || !fin[0].IsError || !strings.Contains(fin[0].Result, "panicked: boom") {
		t.Fatalf("results %+v", fin)
	}
	if testkit.Terminal(events, ref.RunID).Type != messages.RunFinished {
		t.Fatal("the run did not finish")
	}
}

// schemaTool overrides a tool's schema.
type schemaTool struct {
	searchTool
	schema string
}

func (s schemaTool) Def() tool.Def {
	d := s.searchTool.Def()
	d.Schema = json.RawMessage(s.schema)
	return d
}

func toolFinished(events []*messages.Envelope) []*messages.ToolCallFinishedPayload {
	var out []*messages.ToolCallFinishedPayload
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == model.ToolSearch {
			out = append(out, p)
		}
	}
	return out
}

// repairingModel is the scripted model whose director answers bad first:
// turn 1 is not a plan (or names a tool that does not exist); turn 2,
// given the error as guidance, is the plan — unless stubborn.
type repairingModel struct {
	*scripted.Model
	first    string
	plan     string
	stubborn bool
	guidance chan string
}

func (m repairingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role != model.RoleDirector {
		return m.Model.Stream(ctx, req)
	}
	if req.Turn == 1 || m.stubborn {
		return &textStream{chunks: []string{m.first}}, nil
	}
	m.guidance <- req.Guidance
	if len(req.History) != 1 || req.History[0].Text != m.first {
		return nil, fmt.Errorf("%w: the repair turn does not show the first answer: %+v", model.ErrModel, req.History)
	}
	return &textStream{chunks: []string{m.plan}}, nil
}

// TestDirector_OneRepairTurn: a director whose plan is invalid gets one
// more turn with the error as guidance; a second invalid answer fails the
// planning with that error.
func TestDirector_OneRepairTurn(t *testing.T) {
	t.Parallel()
	sm, err := scripted.New(messages.Scenario{Tokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	good := `{"nodes":[{"id":"a","goal":"look","tools":["search"]}]}`
	for _, tc := range []struct {
		name, first string
		stubborn    bool
		says        string
	}{
		{"not json", `{"nodes": [`, false, "not a plan"},
		{"unknown tool", `{"nodes":[{"id":"a","goal":"look","tools":["teleport"]}]}`, false, `uses tool "teleport", which does not exist`},
		{"stubborn", `nope`, true, "not a plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			guidance := make(chan string, 1)
			m := repairingModel{Model: sm, first: tc.first, plan: good, stubborn: tc.stubborn, guidance: guidance}
			e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return m, nil }})
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q"})
			testkit.AssertInvariants(t, events)
			warned := false
			for _, env := range events {
				if w, ok := env.Payload.(*messages.WarningPayload); ok && w.Code == "invalid_output" && strings.Contains(w.Message, tc.says) {
					warned = true
				}
			}
			if !warned {
				t.Error("no invalid_output warning naming the error")
			}
			end := testkit.Terminal(events, ref.RunID)
			if tc.stubborn {
				if p, ok := end.Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodePlanningFailed || !strings.Contains(p.Message, tc.says) {
					t.Fatalf("terminal %+v", end.Payload)
				}
				return
			}
			if g := <-guidance; !strings.Contains(g, tc.says) {
				t.Errorf("guidance %q does not give the error", g)
			}
			if end.Type != messages.RunFinished {
				t.Fatalf("terminal %+v", end.Payload)
			}
		})
	}
}

// TestDirector_FencedPlan: a plan wrapped in a Markdown fence and a
// sentence (what a model without structured output often answers) is the
// plan: no repair turn.
func TestDirector_FencedPlan(t *testing.T) {
	t.Parallel()
	sm, err := scripted.New(messages.Scenario{Tokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	good := `{"nodes":[{"id":"a","goal":"look {carefully}","tools":["search"]}]}`
	m := repairingModel{Model: sm, first: "Here is the plan:\n```json\n" + good + "\n```\nGood luck.", plan: good, guidance: make(chan string, 1)}
	e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return m, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q"})
	testkit.AssertInvariants(t, events)
	if end := testkit.Terminal(events, ref.RunID); end.Type != messages.RunFinished {
		t.Fatalf("terminal %+v", end.Payload)
	}
	if n := testkit.Count(events, messages.Warning); n != 0 {
		t.Errorf("%d warnings: the fenced plan needed a repair turn", n)
	}
	if p := payloads[*messages.PlanProposedPayload](events); len(p) != 1 || p[0].Plan.Nodes[0].Goal != "look {carefully}" {
		t.Errorf("plan_proposed %+v", p)
	}
}
