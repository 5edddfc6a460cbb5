package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// countingModel counts the chunks its streams hand out.
type countingModel struct {
	model.Model
	pulled *atomic.Int64
}

func (m countingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := m.Model.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return countingStream{s, m.pulled}, nil
}

type countingStream struct {
	model.Stream
	pulled *atomic.Int64
}

func (s countingStream) Recv() (model.Chunk, error) {
	c, err := s.Stream.Recv()
	if err == nil {
		s.pulled.Add(1)
	}
	return c, err
}

// gatedJournal blocks every Append while closed is false, until release.
type gatedJournal struct {
	*journal.Memory
	blocked atomic.Bool
	release chan struct{}
}

func (j *gatedJournal) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	if j.blocked.Load() {
		<-j.release
	}
	return j.Memory.Append(ctx, s, evs)
}

// TestOutbox_ModelWaitsForTheJournal: while the journal appends nothing,
// a model streaming 50,000 tokens is read no further than the run's
// outbox window: nothing piles up between the model and the journal.
func TestOutbox_ModelWaitsForTheJournal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var pulled atomic.Int64
		j := &gatedJournal{Memory: journal.NewMemory(), release: make(chan struct{})}
		e := testkit.NewEngine(t, actors.Config{Journal: j, Models: func(sc messages.Scenario) (model.Model, error) {
			m, err := scripted.NewFactory().Model(sc)
			return countingModel{m, &pulled}, err
		}})
		ctx := context.Background()
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 50_000}})
		if err != nil {
			t.Fatal(err)
		}
		j.blocked.Store(true)
		synctest.Wait() // the hub waits in Append; the model's reader waits for credits
		if n := pulled.Load(); n > 2*1024+64 {
			t.Fatalf("the model was read %d chunks ahead of a journal that appends nothing; want at most about one window (1024)", n)
		}
		j.blocked.Store(false)
		close(j.release)
		events, err := testkit.Follow(ctx, e, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		testkit.AssertInvariants(t, events)
		if fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID); fin.Nodes.Completed != 1 {
			t.Fatalf("run_finished %+v", fin.Nodes)
		}
	})
}

func budget(n int64) func(messages.TenantID) actors.Limits {
	return func(messages.TenantID) actors.Limits { return actors.Limits{EventsPerRun: n} }
}

// TestEngine_BudgetExceededEndsTheRun: a run that publishes more events
// than its budget (panicking nodes stream again after their restart, so
// the scenario's estimate fits) ends with exactly one
// run_error{budget_exceeded}, every lane closed.
func TestEngine_BudgetExceededEndsTheRun(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Limits: budget(600)})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 250, PanicNodes: messages.NodeSelector{Fraction: 1}, PanicAttempts: 2}
	if n := sc.WithDefaults().MinEvents(); n >= 600 {
		t.Fatalf("test scenario's estimate %d does not fit the budget", n)
	}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded {
		t.Fatalf("run_error = %+v, want budget_exceeded", runErr)
	}
	// The run stops promptly: what it emits after the budget is its own
	// ending, not more streaming (a window at most).
	if n := len(events); n > 600+1024 {
		t.Fatalf("%d events for a budget of 600", n)
	}
}

// TestEngine_ScenarioTooLargeIsRefused: a run whose scenario can never
// fit the budget is refused before anything starts, with a human in the
// loop too (a run parked on its plan gate holds its whole plan).
func TestEngine_ScenarioTooLargeIsRefused(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Limits: budget(1000)})
	ctx := context.Background()
	huge := &messages.Scenario{Nodes: 100_000, Tokens: 1_000_000}
	_, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: huge})
	var q *actors.QuotaError
	if !errors.As(err, &q) || q.Code != actors.QuotaScenarioTooLarge || q.RetryAfter != 0 {
		t.Fatalf("huge scenario: %v", err)
	}
	if runs, _, _ := e.Runs(context.Background(), runindex.Filter{Limit: 10}); len(runs) != 0 {
		t.Fatalf("a refused run is listed: %+v", runs)
	}
	for _, hitl := range []messages.HITLMode{messages.HITLPlan, messages.HITLNode, messages.HITLTools} {
		if _, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: hitl, Scenario: huge}); !errors.As(err, &q) || q.Code != actors.QuotaScenarioTooLarge {
			t.Fatalf("huge scenario with hitl %s: %v", hitl, err)
		}
	}
}

// TestEngine_ConcurrentRunsQuota: the tenant's live runs are capped; a
// run that ends makes room.
func TestEngine_ConcurrentRunsQuota(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Limits: func(messages.TenantID) actors.Limits {
		return actors.Limits{ConcurrentRuns: 2}
	}})
	ctx := context.Background()
	parked := func(tenant messages.TenantID) (actors.RunRef, error) {
		return e.StartRun(ctx, messages.StartRun{Tenant: tenant, Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1}})
	}
	a, err := parked("t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parked("t1"); err != nil {
		t.Fatal(err)
	}
	var q *actors.QuotaError
	if _, err := parked("t1"); !errors.As(err, &q) || q.Code != actors.QuotaTooManyRuns || q.RetryAfter <= 0 {
		t.Fatalf("third live run: %v", err)
	}
	if _, err := parked("t2"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	if err := e.Abort(ctx, messages.AbortRun{Tenant: "t1", RunID: a.RunID}); err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.Follow(ctx, e, a, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := parked("t1"); err != nil {
		t.Fatalf("after a run ended: %v", err)
	}
}

// parkOnToolApproval starts a run of four nodes in session "s" of r, one
// of which asks for a tool approval, approves the plan and node gates,
// and returns once the other three nodes have completed and the
// approval is pending: the run is parked, its spend so far in the journal.
func parkOnToolApproval(t *testing.T, r *restartable) actors.RunRef {
	t.Helper()
	ctx := context.Background()
	sc := messages.Scenario{Nodes: 4, Waves: 1, Tokens: 30, Approvals: 1}
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", HITL: messages.HITLTools, Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, r.e, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	asked, completed := false, 0
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
		switch in := env.Payload.(type) {
		case *messages.InterruptRaisedPayload:
			if in.Kind != messages.InterruptToolApproval { // the plan and node gates
				_, _ = r.e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove})
			}
			asked = asked || in.Kind == messages.InterruptToolApproval
		case *messages.NodeCompletedPayload:
			completed++
		}
		return asked && completed == 3
	}); err != nil {
		t.Fatal(err)
	}
	return ref
}

// approveAll approves every interrupt pending in session "s" (the tool
// approval a run parked on before a restart).
func approveAll(t *testing.T, e *actors.Engine) {
	t.Helper()
	pending, _, err := e.PendingInterrupts(context.Background(), "", "s", "", 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending after the restart: %+v, %v; want the tool approval", pending, err)
	}
	for _, in := range pending {
		if _, err := e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
	}
}

// usageOf adds up the run's token_usage events.
func usageOf(events []*messages.Envelope) int64 {
	var n int64
	for _, env := range events {
		if u, ok := env.Payload.(*messages.TokenUsagePayload); ok {
			n += u.Usage.InputTokens + u.Usage.OutputTokens
		}
	}
	return n
}

// TestEngine_TokenBudgetEndsTheRun: a run whose model turns use more
// tokens than Limits.TokensPerRun ends with run_error{budget_exceeded}
// naming tokens_per_run, its lanes closed, promptly (nothing like the
// tokens of the whole council is spent).
func TestEngine_TokenBudgetEndsTheRun(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 6, Waves: 3, Tokens: 40}
	full := testkit.NewEngine(t, actors.Config{})
	_, all := testkit.RunCouncil(t, full, messages.StartRun{Question: "q", Scenario: &sc})
	whole := usageOf(all)
	budget := whole / 4
	e := testkit.NewEngine(t, actors.Config{Limits: func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerRun: budget} }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded || !strings.Contains(runErr.Message, "tokens_per_run") {
		t.Fatalf("run_error = %+v, want budget_exceeded for tokens", runErr)
	}
	if used := usageOf(events); used <= budget || used >= whole {
		t.Fatalf("the run used %d tokens with a budget of %d (the whole council uses %d)", used, budget, whole)
	}
}

// TestEngine_TokenBudgetSurvivesARestart: the tokens a run used before a
// restart count against its budget after it (rebuilt from the journal,
// not reset): a run parked on a tool approval with U tokens used comes
// back under a budget of U+1 and ends with budget_exceeded at its next
// turn.
func TestEngine_TokenBudgetSurvivesARestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx := context.Background()
	ref := parkOnToolApproval(t, r)
	used := usageOf(r.all("s"))
	r.cfg.Limits = func(messages.TenantID) actors.Limits { return actors.Limits{TokensPerRun: used + 1} }
	r.restart()
	p, err := testkit.NewProbe(ctx, r.e, "", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	approveAll(t, r.e)
	if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := r.all("s")
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeBudgetExceeded {
		t.Fatalf("run_error = %+v, want budget_exceeded: the tokens before the restart were forgotten", runErr)
	}
	if after := usageOf(events) - used; after > used {
		t.Fatalf("the turns after the restart used %d tokens, more than the %d before: the test cannot tell a reset", after, used)
	}
}
