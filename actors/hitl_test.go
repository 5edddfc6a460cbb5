package actors_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// answerer resumes each interrupt of a run as decide says, reading the
// session until the run's terminal event, and returns every event.
func runWithAnswers(t *testing.T, e *actors.Engine, cmd messages.StartRun, decide func(*messages.InterruptRaisedPayload) messages.Resume) (actors.RunRef, []*messages.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	return runWithAnswersCtx(t, ctx, e, cmd, decide)
}

// runWithAnswersCtx is runWithAnswers bounded by ctx (a test on virtual
// time, where a human may take hours, passes one without a deadline).
func runWithAnswersCtx(t *testing.T, ctx context.Context, e *actors.Engine, cmd messages.StartRun, decide func(*messages.InterruptRaisedPayload) messages.Resume) (actors.RunRef, []*messages.Envelope) {
	t.Helper()
	ref, err := e.StartRun(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for {
		evs, err := p.Until(ctx, func(env *messages.Envelope) bool {
			return env.Type == messages.InterruptRaised || testkit.TerminalOf(ref.RunID)(env)
		})
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		if last.Type.Terminal() {
			return ref, p.Seen()
		}
		raised := last.Payload.(*messages.InterruptRaisedPayload)
		res := decide(raised)
		res.InterruptID = raised.InterruptID
		if _, err := e.Resume(res); err != nil {
			t.Fatalf("resume %s (%s): %v", raised.InterruptID, raised.Kind, err)
		}
	}
}

// gatesThen approves plan and node gates (which hitl tools includes) and
// answers every other interrupt with answer.
func gatesThen(answer func(*messages.InterruptRaisedPayload) messages.Resume) func(*messages.InterruptRaisedPayload) messages.Resume {
	return func(p *messages.InterruptRaisedPayload) messages.Resume {
		if p.Kind == messages.InterruptPlanApproval || p.Kind == messages.InterruptNodeApproval {
			return messages.Resume{Decision: messages.DecisionApprove}
		}
		return answer(p)
	}
}

func payloads[T messages.Payload](events []*messages.Envelope) []T {
	var out []T
	for _, env := range events {
		if p, ok := env.Payload.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

func TestHITL_ToolApprovals(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 3, Waves: 1, Tokens: 4, Approvals: 3}
	n := 0
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLTools, Scenario: &sc},
		gatesThen(func(p *messages.InterruptRaisedPayload) messages.Resume {
			if p.Kind != messages.InterruptToolApproval || p.ToolName != "search" || p.CallID == "" || len(p.ToolArgs) == 0 || p.TimeoutSeconds != 600 {
				t.Errorf("raised = %+v", p)
			}
			n++
			switch n {
			case 1:
				return messages.Resume{Decision: messages.DecisionApprove}
			case 2:
				return messages.Resume{Decision: messages.DecisionReject, Feedback: "not that source"}
			default:
				return messages.Resume{Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`{"query":"edited query"}`)}
			}
		}))
	testkit.AssertInvariants(t, events)
	if n != 3 {
		t.Fatalf("%d approvals asked, want 3", n)
	}
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	var results []*messages.ToolCallFinishedPayload
	results = payloads[*messages.ToolCallFinishedPayload](events)
	if len(results) != 3 {
		t.Fatalf("%d tool results", len(results))
	}
	var rejected, revised bool
	for _, r := range results {
		rejected = rejected || (r.IsError && strings.Contains(r.Result, "not that source"))
		revised = revised || strings.Contains(r.Result, "edited query")
	}
	if !rejected || !revised {
		t.Fatalf("results %+v: want one rejected with the feedback and one run with the edited args", results)
	}
	// Each call is published when the model makes it, marked as waiting
	// for its approval (which follows it).
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallStartedPayload); ok && !p.AwaitsApproval {
			t.Errorf("tool_call_started %+v under hitl tools: not marked awaits_approval", p)
		}
	}
	if got := len(payloads[*messages.InterruptResolvedPayload](events)); got != 3+1+3 { // tools + plan + nodes
		t.Fatalf("%d interrupt_resolved", got)
	}
}

func TestHITL_InfoRequests(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2, InfoRequests: 3}
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", Scenario: &sc},
		func(p *messages.InterruptRaisedPayload) messages.Resume {
			if p.Kind != messages.InterruptInfoRequest || p.Question == "" || p.ContextSnippet == "" {
				t.Errorf("raised = %+v", p)
			}
			return messages.Resume{Response: "assume blue light scatters more"}
		})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	results := payloads[*messages.ToolCallFinishedPayload](events)
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	for _, r := range results {
		if r.Tool != "ask_human" || r.Result != "assume blue light scatters more" || r.IsError {
			t.Fatalf("result %+v", r)
		}
	}
	for _, p := range payloads[*messages.ToolCallStartedPayload](events) {
		if p.AwaitsApproval {
			t.Errorf("tool_call_started %+v: an ask_human call needs no approval", p)
		}
	}
}

// TestHITL_Choices: ask_choice raises a choice interrupt with the options
// it offers; an answer naming an unknown id, or two ids for a single
// choice, is refused and the interrupt stays pending; a valid answer is
// the call's result (ids and labels). A multiple choice takes several; a
// declined choice (decision reject) is an error result with the feedback.
func TestHITL_Choices(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"single", "multiple", "decline"} {
		multiple := mode == "multiple"
		e := testkit.NewEngine(t, actors.Config{})
		sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2, Choices: 2, MultipleChoice: multiple}
		res := messages.Resume{Choices: []string{"deep"}}
		want := `{"choices":["deep"],"labels":["Deep dive"]}`
		switch mode {
		case "multiple":
			res.Choices = []string{"skip", "broad"}
			want = `{"choices":["skip","broad"],"labels":["Skip this aspect","Broad survey"]}`
		case "decline":
			res = messages.Resume{Decision: messages.DecisionReject, Feedback: "none fits"}
			want = "the human declined to choose: none fits"
		}
		answer := res.Choices
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", Scenario: &sc},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				if p.Kind != messages.InterruptChoice || p.Question == "" || len(p.Options) != 3 || p.MultipleChoice != multiple ||
					p.CallID == "" || p.TimeoutAction != messages.DecisionReject {
					t.Errorf("raised = %+v", p)
				}
				bad := [][]string{{"nope"}, nil}
				if !multiple {
					bad = append(bad, []string{"broad", "deep"})
				}
				for _, ids := range bad {
					if _, err := e.Resume(messages.Resume{InterruptID: p.InterruptID, Choices: ids}); err == nil {
						t.Errorf("choices %v accepted", ids)
					}
				}
				return res
			})
		testkit.AssertInvariants(t, events)
		terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		results := payloads[*messages.ToolCallFinishedPayload](events)
		if len(results) != 2 {
			t.Fatalf("%d results, want 2", len(results))
		}
		for _, r := range results {
			if r.Tool != "ask_choice" || r.Result != want || r.IsError != (mode == "decline") {
				t.Fatalf("result %+v, want %s", r, want)
			}
		}
		for _, r := range payloads[*messages.InterruptResolvedPayload](events) {
			if !slices.Equal(r.Choices, answer) || r.Decision != cmp.Or(res.Decision, messages.DecisionApprove) {
				t.Fatalf("interrupt_resolved %+v, want choices %v", r, answer)
			}
		}
	}
}

// TestHITL_ChoiceTimeoutPicksNothing: a choice nobody answers expires
// rejected even when the run's timeout action is approve, and the call's
// result is an error saying nobody chose: a timer never picks an option.
func TestHITL_ChoiceTimeoutPicksNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		ctx := context.Background()
		sc := messages.Scenario{Nodes: 1, Tokens: 2, Choices: 1}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &sc, ApprovalTimeoutSeconds: 30, ApprovalTimeoutAction: messages.DecisionApprove})
		if err != nil {
			t.Fatal(err)
		}
		p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
			t.Fatal(err)
		}
		events := p.Seen()
		testkit.AssertInvariants(t, events)
		exp := payloads[*messages.InterruptExpiredPayload](events)
		if len(exp) != 1 || exp[0].Kind != messages.InterruptChoice || exp[0].Action != messages.DecisionReject {
			t.Fatalf("interrupt_expired = %+v, want one choice rejected", exp)
		}
		res := payloads[*messages.ToolCallFinishedPayload](events)
		if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Result, "nobody chose") {
			t.Fatalf("tool results %+v", res)
		}
	})
}

func TestHITL_PlanGate(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 4, Tokens: 2}

	t.Run("approve", func(t *testing.T) {
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				if p.Kind != messages.InterruptPlanApproval || p.Plan == nil || len(p.Plan.Nodes) != 4 {
					t.Errorf("raised %+v", p)
				}
				return messages.Resume{Decision: messages.DecisionApprove}
			})
		testkit.AssertInvariants(t, events)
		terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	})
	t.Run("revise", func(t *testing.T) {
		edited := messages.Plan{Nodes: []messages.PlanNode{{ID: "x", Goal: "only this"}, {ID: "y", Goal: "then this", Deps: []string{"x"}}}}
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc},
			func(*messages.InterruptRaisedPayload) messages.Resume {
				return messages.Resume{Decision: messages.DecisionRevise, Plan: &edited}
			})
		testkit.AssertInvariants(t, events)
		fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		if fin.Nodes.Total != 2 || fin.Nodes.Completed != 2 {
			t.Fatalf("counts %+v: the edited plan has 2 nodes", fin.Nodes)
		}
		app := payloads[*messages.PlanApprovedPayload](events)
		if len(app) != 1 || !app[0].Edited || app[0].Plan == nil || len(app[0].Waves) != 2 {
			t.Fatalf("plan_approved = %+v", app)
		}
	})
	t.Run("reject", func(t *testing.T) {
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc},
			func(*messages.InterruptRaisedPayload) messages.Resume {
				return messages.Resume{Decision: messages.DecisionReject, Reason: "too broad"}
			})
		testkit.AssertInvariants(t, events)
		if p := terminal[*messages.RunErrorPayload](t, events, ref.RunID); p.Code != messages.ErrCodePlanRejected || !strings.Contains(p.Message, "too broad") {
			t.Fatalf("run_error %+v", p)
		}
		// Rejected three times: two re-plans (the default), then the end.
		if n := len(payloads[*messages.ReplanAttemptPayload](events)); n != messages.DefaultMaxReplans {
			t.Fatalf("%d replan_attempt, want %d", n, messages.DefaultMaxReplans)
		}
	})
	t.Run("reject then approve: the director plans again", func(t *testing.T) {
		var asked []*messages.InterruptRaisedPayload
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				asked = append(asked, p)
				if len(asked) == 1 {
					return messages.Resume{Decision: messages.DecisionReject, Feedback: "fewer nodes"}
				}
				return messages.Resume{Decision: messages.DecisionApprove}
			})
		testkit.AssertInvariants(t, events)
		terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		rej := payloads[*messages.PlanRejectedPayload](events)
		re := payloads[*messages.ReplanAttemptPayload](events)
		if len(rej) != 1 || !rej[0].Replanning || rej[0].Reason != "fewer nodes" {
			t.Fatalf("plan_rejected %+v", rej)
		}
		if len(re) != 1 || re[0].Attempt != 1 || re[0].MaxAttempts != messages.DefaultMaxReplans || re[0].Reason != "fewer nodes" {
			t.Fatalf("replan_attempt %+v", re)
		}
		var lanes []messages.StreamID
		for _, env := range events {
			if env.Type == messages.PlanProposed {
				lanes = append(lanes, env.Lane.StreamID)
			}
		}
		if !slices.Equal(lanes, []messages.StreamID{messages.DirectorStream, messages.DirectorStreamOf(2)}) {
			t.Fatalf("plan_proposed on %v, want director then director:2", lanes)
		}
		if len(asked) != 2 || asked[1].Plan == nil {
			t.Fatalf("plan gates %+v", asked)
		}
	})
	t.Run("max_replans 0: a rejection ends the run", func(t *testing.T) {
		none := 0
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc, MaxReplans: &none},
			func(*messages.InterruptRaisedPayload) messages.Resume {
				return messages.Resume{Decision: messages.DecisionReject, Reason: "no"}
			})
		testkit.AssertInvariants(t, events)
		terminal[*messages.RunErrorPayload](t, events, ref.RunID)
		if rej := payloads[*messages.PlanRejectedPayload](events); len(rej) != 1 || rej[0].Replanning || len(payloads[*messages.ReplanAttemptPayload](events)) != 0 {
			t.Fatalf("plan_rejected %+v", rej)
		}
	})
}

func TestHITL_NodeGateRejectSkipsDependents(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 4, Waves: 2, FanIn: 2, Tokens: 2}
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &sc},
		func(p *messages.InterruptRaisedPayload) messages.Resume {
			switch p.Kind {
			case messages.InterruptPlanApproval:
				return messages.Resume{Decision: messages.DecisionApprove}
			case messages.InterruptNodeApproval:
				if p.NodeID == "n001" {
					return messages.Resume{Decision: messages.DecisionReject, Feedback: "skip it"}
				}
				return messages.Resume{Decision: messages.DecisionApprove}
			}
			t.Fatalf("unexpected interrupt %+v", p)
			return messages.Resume{}
		})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	// n001 rejected; n003 and n004 both depend on it (fan-in 2 over a wave of 2).
	if fin.Nodes.Skipped != 3 || fin.Nodes.Completed != 1 {
		t.Fatalf("counts %+v", fin.Nodes)
	}
}

// TestHITL_NoNodeCompletedIsAnError: a human rejecting every node leaves
// the synthesiser nothing to answer from: the run ends with
// run_error{no_nodes_completed}, not run_finished.
func TestHITL_NoNodeCompletedIsAnError(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2}
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &sc},
		func(p *messages.InterruptRaisedPayload) messages.Resume {
			if p.Kind == messages.InterruptPlanApproval {
				return messages.Resume{Decision: messages.DecisionApprove}
			}
			return messages.Resume{Decision: messages.DecisionReject}
		})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeNoNodesCompleted || runErr.Nodes.Skipped != 2 || testkit.Count(events, messages.SynthesisStarted) != 0 {
		t.Fatalf("run_error %+v", runErr)
	}
}

// TestHITL_ParkedNodeDoesNotBlockSiblings: while n001 waits for a human,
// the other nodes of its wave stream and complete.
func TestHITL_ParkedNodeDoesNotBlockSiblings(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		ctx := context.Background()
		sc := messages.Scenario{Nodes: 3, Waves: 1, Tokens: 10, TokenDelayMS: 10, Approvals: 1}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLTools, Scenario: &sc, ApprovalTimeoutSeconds: 7200})
		if err != nil {
			t.Fatal(err)
		}
		p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		evs, err := p.Until(ctx, func(env *messages.Envelope) bool {
			pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
			if ok && pl.Kind != messages.InterruptToolApproval {
				_, _ = e.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove})
				return false
			}
			return ok
		})
		if err != nil {
			t.Fatal(err)
		}
		raised := evs[len(evs)-1].Payload.(*messages.InterruptRaisedPayload)
		// Both siblings complete while n001 stays parked.
		done := 0
		if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
			if env.Type == messages.NodeCompleted {
				done++
			}
			return done == 2
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // virtual: n001 stays parked however long it takes
		synctest.Wait()
		if list, _, _ := e.PendingInterrupts(ctx, "", ref.SessionID, "", 10); len(list) != 1 || list[0].InterruptID != raised.InterruptID {
			t.Fatalf("pending = %+v", list)
		}
		if _, err := e.Resume(messages.Resume{InterruptID: raised.InterruptID, Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
			t.Fatal(err)
		}
		testkit.AssertInvariants(t, p.Seen())
	})
}

func TestHITL_TimeoutTakesTheAction(t *testing.T) {
	t.Parallel()
	for _, action := range []messages.Decision{"", messages.DecisionApprove} {
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{})
			ctx := context.Background()
			sc := messages.Scenario{Nodes: 1, Tokens: 2, Approvals: 1}
			ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLTools, Scenario: &sc,
				ApprovalTimeoutSeconds: 30, ApprovalTimeoutAction: action})
			if err != nil {
				t.Fatal(err)
			}
			p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var start time.Time
			if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
				pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
				if !ok {
					return false
				}
				if pl.Kind != messages.InterruptToolApproval { // answer the gates at once
					_, _ = e.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove})
					return false
				}
				start = time.Now()
				return true
			}); err != nil {
				t.Fatal(err)
			}
			events, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
			if err != nil {
				t.Fatal(err)
			}
			events = p.Seen()
			testkit.AssertInvariants(t, events)
			if el := time.Since(start); el != 30*time.Second {
				t.Fatalf("the tool approval waited %v of virtual time, want exactly the 30 s timeout", el)
			}
			exp := payloads[*messages.InterruptExpiredPayload](events)
			want := messages.DecisionReject
			if action != "" {
				want = action
			}
			if len(exp) != 1 || exp[0].Action != want {
				t.Fatalf("interrupt_expired = %+v, want action %s", exp, want)
			}
			res := payloads[*messages.ToolCallFinishedPayload](events)[0]
			if res.IsError != (want == messages.DecisionReject) {
				t.Fatalf("tool result %+v after %s", res, want)
			}
			if _, err := e.Resume(messages.Resume{InterruptID: exp[0].InterruptID, Decision: messages.DecisionApprove}); !errors.Is(err, actors.ErrInterruptExpired) {
				t.Fatalf("resume after expiry = %v, want ErrInterruptExpired", err)
			}
		})
	}
}

func TestHITL_ResumeSemantics(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	sc := messages.Scenario{Nodes: 1, Tokens: 2, Approvals: 1}
	ref, err := e.StartRun(ctx, messages.StartRun{Tenant: "t1", Question: "q", HITL: messages.HITLTools, Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "t1", ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	evs, err := p.Until(ctx, func(env *messages.Envelope) bool {
		pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
		if ok && pl.Kind != messages.InterruptToolApproval {
			_, _ = e.Resume(messages.Resume{Tenant: "t1", InterruptID: pl.InterruptID, Decision: messages.DecisionApprove})
			return false
		}
		return ok
	})
	if err != nil {
		t.Fatal(err)
	}
	id := evs[len(evs)-1].Payload.(*messages.InterruptRaisedPayload).InterruptID

	if _, err := e.Resume(messages.Resume{Tenant: "t2", InterruptID: id, Decision: messages.DecisionApprove}); !errors.Is(err, actors.ErrInterruptNotFound) {
		t.Fatalf("other tenant = %v", err)
	}
	if _, err := e.Resume(messages.Resume{Tenant: "t1", InterruptID: "nope", Decision: messages.DecisionApprove}); !errors.Is(err, actors.ErrInterruptNotFound) {
		t.Fatalf("unknown = %v", err)
	}
	var invalid *actors.InvalidResumeError
	for _, bad := range []messages.Resume{{}, {Decision: messages.DecisionRevise}, {Decision: "maybe"}, {Decision: messages.DecisionRevise, EditedArgs: json.RawMessage(`[1]`)}} {
		bad.Tenant, bad.InterruptID = "t1", id
		if _, err := e.Resume(bad); !errors.As(err, &invalid) {
			t.Fatalf("resume %+v = %v, want InvalidResumeError", bad, err)
		}
	}
	// Still pending after the invalid ones; 20 concurrent resumes, one wins.
	var ok, conflict, notFound atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := e.Resume(messages.Resume{Tenant: "t1", InterruptID: id, Decision: messages.DecisionApprove})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, actors.ErrInterruptConflict):
				conflict.Add(1)
			case errors.Is(err, actors.ErrInterruptNotFound):
				notFound.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || conflict.Load() != 19 || notFound.Load() != 0 {
		t.Fatalf("ok %d conflict %d not found %d", ok.Load(), conflict.Load(), notFound.Load())
	}
	if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, p.Seen())
	if _, err := e.Resume(messages.Resume{Tenant: "t1", InterruptID: id, Decision: messages.DecisionApprove}); !errors.Is(err, actors.ErrInterruptResolved) {
		t.Fatalf("resume after resolution = %v, want ErrInterruptResolved", err)
	}
}

// TestHITL_AbortWhileParked: a run parked on its plan gate, one on its node
// gates (lanes not yet opened: the nodes close as skipped), and one parked
// on a tool approval, both end cleanly when aborted.
func TestHITL_AbortWhileParked(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	for _, hitl := range []messages.HITLMode{messages.HITLPlan, messages.HITLNode, messages.HITLTools} {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		sc := messages.Scenario{Nodes: 3, Waves: 1, Tokens: 2, Approvals: 3}
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: hitl, Scenario: &sc})
		if err != nil {
			t.Fatal(err)
		}
		p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		raised := 0
		if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
			if env.Type == messages.InterruptRaised {
				pl := env.Payload.(*messages.InterruptRaisedPayload)
				if hitl == messages.HITLPlan {
					return true // parked on the plan gate
				}
				if hitl == messages.HITLNode && pl.Kind == messages.InterruptNodeApproval {
					return true // parked on a node gate: its lane is not open yet
				}
				if pl.Kind != messages.InterruptToolApproval {
					_, _ = e.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove})
					return false
				}
				raised++
			}
			return raised >= 2
		}); err != nil {
			t.Fatal(err)
		}
		if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
			t.Fatal(err)
		}
		events := p.Seen()
		p.Close()
		cancel()
		testkit.AssertInvariants(t, events)
		if c := terminal[*messages.RunErrorPayload](t, events, ref.RunID); c.Code != messages.ErrCodeAborted {
			t.Fatalf("%s: terminal %+v", hitl, c)
		}
		cancelled := 0
		for _, r := range payloads[*messages.InterruptResolvedPayload](events) {
			if r.Decision == messages.DecisionCancel {
				cancelled++
			}
		}
		if cancelled == 0 {
			t.Fatalf("%s: no interrupt_resolved{cancel}", hitl)
		}
		if list, _, _ := e.PendingInterrupts(ctx, "", ref.SessionID, "", 10); len(list) != 0 {
			t.Fatalf("%s: pending after abort: %+v", hitl, list)
		}
	}
}
