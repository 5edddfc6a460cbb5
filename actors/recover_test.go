package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit"
)

// sessionsJournal is an in-memory journal that also lists its sessions,
// standing in for the durable journal across "restarts" in one process.
type sessionsJournal struct {
	*journal.Memory
	mu       sync.Mutex
	sessions []messages.SessionID
}

func (j *sessionsJournal) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	j.mu.Lock()
	if !slices.Contains(j.sessions, s) {
		j.sessions = append(j.sessions, s)
	}
	j.mu.Unlock()
	return j.Memory.Append(ctx, s, evs)
}

func (j *sessionsJournal) Sessions(context.Context) ([]messages.SessionID, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.sessions), nil
}

func (j *sessionsJournal) Close() error { return nil } // outlives the engines

// restartable starts engines on one journal: each restart freezes the
// previous engine and recovers from the journal.
type restartable struct {
	t   *testing.T
	j   *sessionsJournal
	e   *actors.Engine
	cfg actors.Config // the engines' settings besides the journal and logger
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, j: &sessionsJournal{Memory: journal.NewMemory()}}
	r.start()
	t.Cleanup(func() { _ = r.e.Shutdown(context.Background()) })
	return r
}

func (r *restartable) start() {
	cfg := r.cfg
	cfg.Journal, cfg.KeepRunsOnShutdown, cfg.Logger = r.j, true, testkit.TestLogger(r.t, 0)
	e, err := actors.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = e
}

func (r *restartable) restart() {
	r.t.Helper()
	if err := r.e.Shutdown(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.start()
}

// all returns every event of the session, across restarts.
func (r *restartable) all(session messages.SessionID) []*messages.Envelope {
	r.t.Helper()
	var out []*messages.Envelope
	for after := uint64(0); ; {
		evs, err := r.j.ReadAfter(context.Background(), actors.JournalKey("", session), after, 1000)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, enc := range evs {
			env, err := enc.Envelope()
			if err != nil {
				r.t.Fatal(err)
			}
			out = append(out, env)
		}
		after = evs[len(evs)-1].Seq
	}
}

// restartAt follows session until cut, restarts the engine there (what
// it had not journaled is lost, as in a crash), follows the session again
// until run ends, and returns every event of the session across the
// restart.
func (r *restartable) restartAt(ctx context.Context, session messages.SessionID, run messages.RunID, cut func(*messages.Envelope) bool) []*messages.Envelope {
	r.t.Helper()
	p, err := testkit.NewProbe(ctx, r.e, "", session, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := p.Until(ctx, cut); err != nil {
		r.t.Fatal(err)
	}
	p.Close()
	r.restart()
	p, err = testkit.NewProbe(ctx, r.e, "", session, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Until(ctx, testkit.TerminalOf(run)); err != nil {
		r.t.Fatal(err)
	}
	return r.all(session)
}

// approveGates answers plan and node approvals as they come, until stop.
func approveGates(ctx context.Context, t *testing.T, e *actors.Engine, p *testkit.Probe, stop func(*messages.Envelope) bool) {
	t.Helper()
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
		if pl, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && (pl.Kind == messages.InterruptPlanApproval || pl.Kind == messages.InterruptNodeApproval) {
			if _, err := e.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			return false
		}
		return stop(env)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRecover_ParkedRunsComeBackParked: runs parked on tool approvals and
// on the plan gate survive a restart with the same interrupt ids, and
// finish once resumed; the session's seq continues without a gap.
func TestRecover_ParkedRunsComeBackParked(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()

	tools, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLTools, SessionID: "s1",
		Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Approvals: 2}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, r.e, "", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	raised := 0
	approveGates(ctx, t, r.e, p, func(env *messages.Envelope) bool {
		if pl, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && pl.Kind == messages.InterruptToolApproval {
			raised++
		}
		return raised == 2
	})
	plan, err := r.e.StartRun(ctx, messages.StartRun{Question: "q2", HITL: messages.HITLPlan, SessionID: "s1", Scenario: &messages.Scenario{Nodes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
		pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
		return ok && env.RunID == plan.RunID && pl.Kind == messages.InterruptPlanApproval
	}); err != nil {
		t.Fatal(err)
	}
	before, _, _ := r.e.PendingInterrupts(ctx, "", "s1", "", 10)
	head, _ := r.e.Head(ctx, "", "s1")
	p.Close()

	r.restart()

	after, _, err := r.e.PendingInterrupts(ctx, "", "s1", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 3 || len(before) != 3 {
		t.Fatalf("pending before %d, after %d; want 3 and 3", len(before), len(after))
	}
	byID := func(l []messages.Interrupt) {
		slices.SortFunc(l, func(a, b messages.Interrupt) int { return strings.Compare(a.InterruptID, b.InterruptID) })
	}
	byID(before)
	byID(after)
	for i := range after {
		if after[i].InterruptID != before[i].InterruptID || !after[i].ExpiresAt.Equal(before[i].ExpiresAt) {
			t.Fatalf("interrupt %d: %s/%v before, %s/%v after", i, before[i].InterruptID, before[i].ExpiresAt, after[i].InterruptID, after[i].ExpiresAt)
		}
	}
	if sum, _ := r.e.Run("", tools.RunID); sum.Status.Terminal() {
		t.Fatalf("parked run listed as %s", sum.Status)
	}
	// An old cursor still works: subscribe after the head seen before.
	p, err = testkit.NewProbe(ctx, r.e, "", "s1", head)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, in := range after {
		if _, err := r.e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}); err != nil {
			t.Fatalf("resume %s after restart: %v", in.InterruptID, err)
		}
	}
	ended := 0
	approveGates(ctx, t, r.e, p, func(env *messages.Envelope) bool {
		if env.Type.Terminal() {
			ended++
		}
		return ended == 2
	})
	if first := p.Seen()[0]; first.Seq != head+1 {
		t.Fatalf("after the restart the stream continued at seq %d, want %d", first.Seq, head+1)
	}
	events := r.all("s1")
	testkit.AssertInvariants(t, events)
	for _, run := range []messages.RunID{tools.RunID, plan.RunID} {
		if env := testkit.Terminal(events, run); env == nil || env.Type != messages.RunFinished {
			t.Fatalf("run %s did not finish: %+v", run, env)
		}
	}
}

// TestRecover_WorkingRunResumes: a run whose nodes were streaming when the
// engine stopped resumes: completed nodes are not run again, the others
// restart (agent_restarted), and the run finishes.
func TestRecover_WorkingRunResumes(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", Concurrency: 2,
		Scenario: &messages.Scenario{Nodes: 6, Waves: 2, Tokens: 40, TokenDelayMS: 2, SubagentsPerNode: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Stop once two nodes completed and another one is mid-stream.
	completed := 0
	events := r.restartAt(ctx, "s", ref.RunID, func(env *messages.Envelope) bool {
		if env.Type == messages.NodeCompleted {
			completed++
		}
		return completed >= 2 && env.Type == messages.TextDelta && strings.HasPrefix(string(env.Lane.StreamID), "node:") && env.Lane.Depth == 1
	})
	testkit.AssertInvariants(t, events)
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("terminal %s", env.Type)
	}
	started := map[string]int{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeStartedPayload); ok {
			started[p.NodeID]++
		}
	}
	for id, n := range started {
		if n != 1 {
			t.Fatalf("node %s started %d times", id, n)
		}
	}
	if testkit.Count(events, messages.AgentRestarted) == 0 {
		t.Fatal("no agent was restarted: the run was not interrupted mid-wave?")
	}
}

// TestRecover_KeepsSupervision: a run resumed after a restart keeps the
// supervision it chose (run_started records it): with worker=stop, the
// node of its second wave that panics after the restart is not restarted
// and the run fails (the restarted engine's default would restart it).
// The node panics on its first three attempts: the first engine may
// already have started (and lost) attempt 1 when it stops, so the resumed
// run's attempt 2 must panic too.
func TestRecover_KeepsSupervision(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s",
		Supervision: &messages.Supervision{Worker: &messages.SupervisionPolicy{Strategy: messages.SupervisionStop}},
		Scenario:    &messages.Scenario{Nodes: 2, Waves: 2, Tokens: 4, PanicAttempts: 3, PanicNodes: messages.NodeSelector{IDs: []string{"n002"}}}})
	if err != nil {
		t.Fatal(err)
	}
	events := r.restartAt(ctx, "s", ref.RunID, func(env *messages.Envelope) bool { return env.Type == messages.NodeCompleted })
	testkit.AssertInvariants(t, events)
	p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
	if !ok || !strings.Contains(p.Message, "not restarted (supervision stop)") {
		t.Fatalf("terminal %+v, want the panicking node failed by worker=stop", testkit.Terminal(events, ref.RunID).Payload)
	}
}

// TestRecover_TeamAndDebateNodesResume: a restart in the middle of a team
// node (nested waves streaming) or a debate (a turn streaming) resumes
// it: the team goes on with its nested graph, the debate from its round
// and speaker; a steering note still being translated is rejected; the
// run finishes, every invariant holding across the restart.
func TestRecover_TeamAndDebateNodesResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sc   messages.Scenario
		stop func(*messages.Envelope) bool
	}{
		{"team", messages.Scenario{Nodes: 3, Waves: 2, Teams: 1, TeamSize: 3, Tokens: 40, TokenDelayMS: 2},
			func(env *messages.Envelope) bool {
				return env.Type == messages.TextDelta && env.Lane.StreamID == "node:n001/m1"
			}},
		{"debate", messages.Scenario{Nodes: 2, Waves: 1, Tokens: 40, TokenDelayMS: 2, Debate: &messages.DebateScenario{Agents: 2, Rounds: 3, Judge: true}},
			func(env *messages.Envelope) bool {
				return env.Type == messages.TextDelta && env.Lane.StreamID == messages.DebateTurnStream("n001", 2, "a1")
			}},
		// A debater with tools cut after its search call's result: its turn
		// runs again as a new agent (its calls "#2").
		{"debate with tools", messages.Scenario{Nodes: 2, Waves: 1, Tokens: 40, TokenDelayMS: 2,
			Debate: &messages.DebateScenario{Agents: 2, Rounds: 3, Judge: true, Tools: []string{"search"}}},
			func(env *messages.Envelope) bool {
				return env.Type == messages.TextDelta && env.Lane.StreamID == messages.DebateTurnStream("n001", 2, "a1")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRestartable(t)
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			sc := tc.sc
			sc.Steering = []messages.SteeringScript{{AtWave: 0, Note: "later", Diff: &messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpSetRole, NodeID: "n002", Role: "x"}}}}}
			ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", Scenario: &sc})
			if err != nil {
				t.Fatal(err)
			}
			events := r.restartAt(ctx, "s", ref.RunID, tc.stop)
			testkit.AssertInvariants(t, events)
			fin, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunFinishedPayload)
			if !ok || fin.Nodes.Completed != fin.Nodes.Total {
				t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
			}
			// The note was being translated by the model when the process
			// stopped: it is rejected (lost), once.
			if n := testkit.Count(events, messages.SteeringApplied) + testkit.Count(events, messages.SteeringRejected); n != 1 {
				t.Fatalf("the steering note ended %d times, want once", n)
			}
			if testkit.Count(events, messages.AgentRestarted) == 0 {
				t.Fatal("nothing restarted: the restart did not cut the team or the debate")
			}
		})
	}
}

// TestRecover_RetentionKeepsLiveRuns: retention trims a session hard
// (keep 5 events) while one run is parked on a node approval and another
// is working; after a restart both are back (the parked one on the same
// interrupt) and end normally: retention never strands a run.
func TestRecover_RetentionKeepsLiveRuns(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	done, _ := testkit.RunCouncil(t, r.e, messages.StartRun{Question: "old", SessionID: "ret", Scenario: &messages.Scenario{Nodes: 2, Tokens: 5}})
	parked, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLNode, SessionID: "ret", Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 3}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, r.e, "", "ret", 0)
	if err != nil {
		t.Fatal(err)
	}
	var nodeGate string
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
		pl, ok := env.Payload.(*messages.InterruptRaisedPayload)
		switch {
		case !ok || env.RunID != parked.RunID:
		case pl.Kind == messages.InterruptPlanApproval:
			if _, err := r.e.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
		case pl.Kind == messages.InterruptNodeApproval:
			nodeGate = pl.InterruptID
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	key := actors.JournalKey("", "ret")
	trimmed, err := journal.ApplyRetention(ctx, r.j, key, journal.Retention{MaxEvents: 5}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if trimmed == 0 {
		t.Fatal("retention trimmed nothing: the ended run's events should go")
	}
	r.restart()
	list, _, err := r.e.PendingInterrupts(ctx, "", "ret", "", 10)
	if err != nil || len(list) != 2 || !slices.ContainsFunc(list, func(in messages.Interrupt) bool { return in.InterruptID == nodeGate }) {
		t.Fatalf("after retention and a restart: pending %+v, %v; want the two node gates, %s among them", list, err, nodeGate)
	}
	if sum, err := r.e.Run("", done.RunID); err != nil || sum.Status != messages.StatusFinished {
		t.Fatalf("the trimmed, ended run reads %+v, %v", sum, err)
	}
	p, err = testkit.NewProbe(ctx, r.e, "", "ret", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, in := range list {
		if _, err := r.e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Until(ctx, testkit.TerminalOf(parked.RunID)); err != nil {
		t.Fatal(err)
	}
	if v := testkit.CheckPartial(r.all("ret")); len(v) != 0 { // the session's start was trimmed
		t.Fatalf("invariants: %v", v)
	}
	fin, err := r.e.Run("", parked.RunID)
	if err != nil || fin.Status != messages.StatusFinished {
		t.Fatalf("the parked run ended %+v, %v; want finished", fin, err)
	}
}

// TestRecover_UnresumableRunEnds: a run whose model cannot be built after
// a restart ends with run_error{internal} instead of staying live forever.
func TestRecover_UnresumableRunEnds(t *testing.T) {
	t.Parallel()
	j := &sessionsJournal{Memory: journal.NewMemory()}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	e1, err := actors.New(actors.Config{Journal: j, KeepRunsOnShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := e1.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "u", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e1, "", "u", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := e1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e2 := testkit.NewEngine(t, actors.Config{Journal: j, KeepRunsOnShutdown: true, Models: func(messages.Scenario) (model.Model, error) {
		return nil, errors.New("the model's endpoint is gone")
	}})
	events, err := testkit.Follow(ctx, e2, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeInternal || !strings.Contains(runErr.Message, "endpoint is gone") {
		t.Fatalf("run_error = %+v", runErr)
	}
	if live, _ := j.LiveRuns(ctx); len(live) != 0 {
		t.Fatalf("still live in the catalogue: %+v", live)
	}
}

// TestRecover_ReplanResumes: a restart while the director plans again
// after a rejection (cut at replan_attempt, or at the re-plan's first
// reasoning) resumes the re-plan on its own lane, told the rejection;
// its plan gate comes, is approved, and the run finishes.
func TestRecover_ReplanResumes(t *testing.T) {
	t.Parallel()
	for name, cut := range map[string]func(*messages.Envelope) bool{
		"at replan_attempt": func(env *messages.Envelope) bool { return env.Type == messages.ReplanAttempt },
		"while re-planning": func(env *messages.Envelope) bool {
			return env.Type == messages.ReasoningDelta && env.Lane.StreamID == messages.DirectorStreamOf(2)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRestartable(t)
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", HITL: messages.HITLPlan,
				Scenario: &messages.Scenario{Nodes: 3, Tokens: 4, TokenDelayMS: 1}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := testkit.NewProbe(ctx, r.e, "", "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised })
			if err != nil {
				t.Fatal(err)
			}
			gate := evs[len(evs)-1].Payload.(*messages.InterruptRaisedPayload)
			if _, err := r.e.Resume(messages.Resume{InterruptID: gate.InterruptID, Decision: messages.DecisionReject, Feedback: "fewer"}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Until(ctx, cut); err != nil {
				t.Fatal(err)
			}
			p.Close()
			r.restart()
			p, err = testkit.NewProbe(ctx, r.e, "", "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			gates := 0
			for {
				evs, err := p.Until(ctx, func(env *messages.Envelope) bool {
					return env.Type == messages.InterruptRaised || testkit.TerminalOf(ref.RunID)(env)
				})
				if err != nil {
					t.Fatal(err)
				}
				last := evs[len(evs)-1]
				if last.Type.Terminal() {
					break
				}
				in := last.Payload.(*messages.InterruptRaisedPayload)
				if in.InterruptID == gate.InterruptID {
					continue // the rejected gate, replayed
				}
				gates++
				if _, err := r.e.Resume(messages.Resume{InterruptID: in.InterruptID, Decision: messages.DecisionApprove}); err != nil {
					t.Fatal(err)
				}
			}
			events := r.all("s")
			testkit.AssertInvariants(t, events)
			if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
				t.Fatalf("terminal %s", env.Type)
			}
			if gates != 1 || testkit.Count(events, messages.ReplanAttempt) != 1 || testkit.Count(events, messages.PlanProposed) != 2 {
				t.Fatalf("%d new gates, %d replan_attempt, %d plan_proposed; want 1, 1, 2", gates,
					testkit.Count(events, messages.ReplanAttempt), testkit.Count(events, messages.PlanProposed))
			}
		})
	}
}

// TestRecover_RestartedDebateRoundResumes: a restart of the server while a
// debate round runs again after an all-for-one restart (cut at
// debate_round_restarted, or during the second run's first turn) resumes
// the second run on its own lanes; the run finishes with every invariant.
func TestRecover_RestartedDebateRoundResumes(t *testing.T) {
	t.Parallel()
	for name, cut := range map[string]func(*messages.Envelope) bool{
		"at debate_round_restarted": func(env *messages.Envelope) bool { return env.Type == messages.DebateRoundRestarted },
		"in the second run": func(env *messages.Envelope) bool {
			return env.Type == messages.TextDelta && env.Lane.StreamID == messages.DebateTurnStreamAt("n001", 2, 2, "a1")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRestartable(t)
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 6, TokenDelayMS: 1,
				Debate: &messages.DebateScenario{Agents: 3, Rounds: 2, Judge: true, PanicRound: 2}}
			ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s", Scenario: &sc})
			if err != nil {
				t.Fatal(err)
			}
			events := r.restartAt(ctx, "s", ref.RunID, cut)
			testkit.AssertInvariants(t, events)
			if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
				t.Fatalf("terminal %s %+v", env.Type, env.Payload)
			}
			if n := testkit.Count(events, messages.DebateRoundRestarted); n != 1 {
				t.Fatalf("%d debate_round_restarted, want 1 (a resumed second run is not restarted again)", n)
			}
		})
	}
}

// crashAfterJournal journals a session's events until the first one that
// matches at (included) and loses every later one, as a crash right after
// that event's fsync would.
type crashAfterJournal struct {
	*sessionsJournal
	at      func(*messages.Encoded) bool
	mu      sync.Mutex
	crashed bool
}

func (j *crashAfterJournal) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.crashed {
		return nil // lost with the process
	}
	for i, enc := range evs {
		if j.at(enc) {
			j.crashed = true
			return j.sessionsJournal.Append(ctx, s, evs[:i+1])
		}
	}
	return j.sessionsJournal.Append(ctx, s, evs)
}

// TestRecover_AcceptedAbortOutlivesACrash: an abort answered accepted is
// journaled first (run_abort_requested), so a crash right after it, before
// the run's end was journaled, still ends the run as aborted at the next
// start — whether it was parked on the plan gate, parked on node gates or
// streaming — with its pending interrupts cancelled and the stream valid.
// (Before run_abort_requested existed, recovery resumed such a run, which
// could finish: found by testkit/sim, seeds 21364 and 24076.)
func TestRecover_AcceptedAbortOutlivesACrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		start messages.StartRun
		// ready is the event after which the run is aborted.
		ready func(*messages.Envelope) bool
	}{
		{"parked on the plan gate",
			messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2}},
			func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }},
		{"parked on node gates", // the plan gate (approved by the test) comes first
			messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &messages.Scenario{Nodes: 3, Waves: 1}},
			func(env *messages.Envelope) bool {
				p, ok := env.Payload.(*messages.InterruptRaisedPayload)
				return ok && p.Kind == messages.InterruptNodeApproval
			}},
		{"streaming",
			messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 3, Waves: 1, Tokens: 1000, TokenDelayMS: 2}},
			func(env *messages.Envelope) bool {
				return env.Type == messages.TextDelta && env.Lane.StreamID != messages.DirectorStream
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
			defer cancel()
			j := &crashAfterJournal{sessionsJournal: &sessionsJournal{Memory: journal.NewMemory()},
				at: func(enc *messages.Encoded) bool { return enc.Type == messages.RunAbortRequested }}
			e1, err := actors.New(actors.Config{Journal: j, KeepRunsOnShutdown: true, Logger: testkit.TestLogger(t, 0)})
			if err != nil {
				t.Fatal(err)
			}
			c.start.SessionID = "s"
			ref, err := e1.StartRun(ctx, c.start)
			if err != nil {
				t.Fatal(err)
			}
			p, err := testkit.NewProbe(ctx, e1, "", "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Until(ctx, func(env *messages.Envelope) bool {
				if pl, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && pl.Kind == messages.InterruptPlanApproval && c.start.HITL == messages.HITLNode {
					if _, err := e1.Resume(messages.Resume{InterruptID: pl.InterruptID, Decision: messages.DecisionApprove}); err != nil {
						t.Fatal(err)
					}
				}
				return c.ready(env)
			}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			if err := e1.Abort(ctx, messages.AbortRun{RunID: ref.RunID, Reason: "stop it"}); err != nil {
				t.Fatal(err)
			}
			// Accepted: its record is journaled; what came after is lost.
			if err := e1.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if live, _ := j.LiveRuns(ctx); len(live) != 1 {
				t.Fatalf("live runs in the journal after the crash: %+v, want the aborted run", live)
			}

			e2 := testkit.NewEngine(t, actors.Config{Journal: j.sessionsJournal, KeepRunsOnShutdown: true})
			events, err := testkit.Follow(ctx, e2, ref, 0)
			if err != nil {
				t.Fatal(err)
			}
			testkit.AssertInvariants(t, events)
			if runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID); runErr.Code != messages.ErrCodeAborted || runErr.Message != "stop it" {
				t.Fatalf("run_error = %+v, want aborted: stop it", runErr)
			}
			raised, closed := testkit.Count(events, messages.InterruptRaised), testkit.Count(events, messages.InterruptResolved)+testkit.Count(events, messages.InterruptExpired)
			if raised != closed {
				t.Errorf("%d interrupts raised, %d resolved or expired", raised, closed)
			}
			if err := e2.Abort(ctx, messages.AbortRun{RunID: ref.RunID}); !errors.Is(err, actors.ErrRunTerminal) {
				t.Errorf("a second abort: %v, want ErrRunTerminal", err)
			}
		})
	}
}

// TestRecover_ParkedChoiceComesBackParked: a run parked on a choice
// survives a restart with the same interrupt and options; the answer
// given after it checks ids against those options and is the call's
// result.
func TestRecover_ParkedChoiceComesBackParked(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "s1", Scenario: &messages.Scenario{Nodes: 1, Tokens: 4, Choices: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, r.e, "", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }); err != nil {
		t.Fatal(err)
	}
	p.Close()
	r.restart()
	after, _, err := r.e.PendingInterrupts(ctx, "", "s1", "", 10)
	if err != nil || len(after) != 1 || after[0].Kind != messages.InterruptChoice || len(after[0].Options) != 3 {
		t.Fatalf("pending after the restart: %+v %v", after, err)
	}
	if _, err := r.e.Resume(messages.Resume{InterruptID: after[0].InterruptID, Choices: []string{"nope"}}); err == nil {
		t.Fatal("an unknown option id was accepted after the restart")
	}
	p, err = testkit.NewProbe(ctx, r.e, "", "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := r.e.Resume(messages.Resume{InterruptID: after[0].InterruptID, Choices: []string{"deep"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := r.all("s1")
	testkit.AssertInvariants(t, events)
	var results []string
	for _, env := range events {
		if pl, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && pl.Tool == "ask_choice" {
			results = append(results, pl.Result)
		}
	}
	if len(results) != 1 || results[0] != `{"choices":["deep"],"labels":["Deep dive"]}` {
		t.Fatalf("ask_choice results %q", results)
	}
	if env := testkit.Terminal(events, ref.RunID); env == nil || env.Type != messages.RunFinished {
		t.Fatalf("terminal %+v", env)
	}
}
