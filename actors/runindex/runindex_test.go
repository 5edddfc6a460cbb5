package runindex_test

import (
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
)

func env(seq uint64, run messages.RunID, p messages.Payload) *messages.Envelope {
	return &messages.Envelope{Seq: seq, Type: p.EventType(), RunID: run, SessionID: "s1", Timestamp: time.Unix(int64(seq), 0).UTC(), Payload: p}
}

func TestIndex_FoldLifecycle(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	x.Register("t1", "r1", "s1", "why", time.Unix(0, 0))
	steps := []struct {
		p    messages.Payload
		want messages.RunStatus
	}{
		{&messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}, {ID: "b"}}}, Waves: [][]string{{"a"}, {"b"}}}, messages.StatusPlanning},
		{&messages.PlanApprovedPayload{Automatic: true}, messages.StatusRunning},
		{&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a"}}, messages.StatusRunning},
		{&messages.NodeStartedPayload{NodeID: "a"}, messages.StatusRunning},
		{&messages.NodeCompletedPayload{NodeID: "a"}, messages.StatusRunning},
		{&messages.NodeSkippedPayload{NodeID: "b"}, messages.StatusRunning},
	}
	for i, st := range steps {
		if _, ended := x.Apply("t1", env(uint64(i+1), "r1", st.p)); ended {
			t.Fatalf("%s ended the run", st.p.EventType())
		}
		got, ok := x.Get("t1", "r1")
		if !ok || got.Status != st.want {
			t.Fatalf("after %s: status %q, want %q", st.p.EventType(), got.Status, st.want)
		}
	}
	if c := x.Counts(); c[messages.StatusRunning] != 1 || c[messages.StatusPlanning] != 0 {
		t.Fatalf("counts while running = %v", c)
	}
	final, ended := x.Apply("t1", env(7, "r1", &messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "stop", Nodes: messages.NodeCounts{Total: 2, Completed: 1, Skipped: 1}}))
	if !ended || final.Status != messages.StatusAborted || final.Nodes.Total != 2 || final.Nodes.Completed != 1 || final.Nodes.Skipped != 1 ||
		final.ErrorCode != messages.ErrCodeAborted || final.EndedAt == nil || final.LastSeq != 7 || final.Waves != 2 || final.Question != "why" {
		t.Fatalf("final summary = %+v (ended %v)", final, ended)
	}
	if _, ok := x.Get("t2", "r1"); ok {
		t.Fatal("another tenant can read the run")
	}
	x.Remove("r1")
	if _, ok := x.Get("t1", "r1"); ok || x.Len() != 0 {
		t.Fatal("a removed run is still in the index")
	}
	// The ended count outlives the run's removal; no live status is left.
	if c := x.Counts(); c[messages.StatusAborted] != 1 || c[messages.StatusRunning] != 0 || c[messages.StatusPlanning] != 0 {
		t.Fatalf("counts = %v", c)
	}
}

func TestIndex_UnknownRunsAreIgnored(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	if _, ended := x.Apply("t1", env(1, "nobody", &messages.RunFinishedPayload{})); ended {
		t.Fatal("an unregistered run ended")
	}
	x.Remove("nobody")
	if x.Len() != 0 || len(x.Counts()) != 0 {
		t.Fatal("state for an unknown run")
	}
}

func TestFilter_Match(t *testing.T) {
	t.Parallel()
	s := messages.RunSummary{SessionID: "s1", Status: messages.StatusFinished}
	for _, c := range []struct {
		f    runindex.Filter
		want bool
	}{
		{runindex.Filter{}, true},
		{runindex.Filter{Session: "s1"}, true},
		{runindex.Filter{Session: "s2"}, false},
		{runindex.Filter{Status: messages.StatusFinished}, true},
		{runindex.Filter{Session: "s1", Status: messages.StatusFailed}, false},
	} {
		if got := c.f.Match(s); got != c.want {
			t.Errorf("%+v.Match = %v, want %v", c.f, got, c.want)
		}
	}
}

// TestIndex_ApplyChecksTenantAndSession: an event that names a run of
// another tenant or session does not touch it.
func TestIndex_ApplyChecksTenantAndSession(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	x.Register("t1", "r1", "s1", "q", time.Unix(0, 0))
	if _, ended := x.Apply("t2", env(1, "r1", &messages.RunFinishedPayload{})); ended {
		t.Fatal("another tenant's event ended the run")
	}
	other := env(1, "r1", &messages.RunFinishedPayload{})
	other.SessionID = "s2"
	if _, ended := x.Apply("t1", other); ended {
		t.Fatal("another session's event ended the run")
	}
	if s, _ := x.Get("t1", "r1"); s.Status != messages.StatusPlanning {
		t.Fatalf("status %s", s.Status)
	}
}

// TestSummarize_RunGraphOnly: a summary counts the run's own plan (as the
// terminal event does), not a team's nested nodes, and a team's waves do
// not move the run's wave.
func TestSummarize_RunGraphOnly(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	x.Register("t1", "r1", "s1", "why", time.Unix(0, 0))
	run := messages.RunLane()
	team := run.Child(messages.NodeStream("T"))
	nested := team.Child(messages.NodeStream("T/x"))
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "T", Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}}}}, {ID: "b"}}}
	seq := uint64(0)
	apply := func(lane messages.Lane, p messages.Payload) {
		seq++
		e := env(seq, "r1", p)
		e.Lane = lane
		x.Apply("t1", e)
	}
	apply(run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"T", "b"}}})
	apply(run, &messages.PlanApprovedPayload{})
	apply(run, &messages.WaveStartedPayload{Wave: 0})
	apply(team, &messages.NodeStartedPayload{NodeID: "T", Kind: messages.KindTeam})
	apply(team, &messages.TeamStartedPayload{TeamID: "T", Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "T/x"}}}, Waves: [][]string{{"T/x"}, {"T/y"}}})
	apply(team, &messages.WaveStartedPayload{Wave: 1, Team: "T"})
	apply(nested, &messages.NodeStartedPayload{NodeID: "T/x"})
	apply(nested, &messages.NodeCompletedPayload{NodeID: "T/x"})
	apply(nested, &messages.TokenUsagePayload{Usage: messages.Usage{InputTokens: 7}})
	s, _ := x.Get("t1", "r1")
	if s.Status != messages.StatusRunning || s.Wave != 0 || s.Waves != 1 || s.Running != 1 || s.Nodes != (messages.NodeCounts{Total: 2}) || s.Usage.InputTokens != 7 {
		t.Fatalf("summary %+v", s)
	}
	apply(team.Child(messages.SynthesisStreamOf("T")), &messages.SynthesisStartedPayload{})
	if s, _ := x.Get("t1", "r1"); s.Status != messages.StatusRunning {
		t.Fatalf("a team's synthesis made the run %s", s.Status)
	}
	apply(run.Child(messages.SynthesisStream), &messages.SynthesisStartedPayload{})
	if s, _ := x.Get("t1", "r1"); s.Status != messages.StatusSynthesizing {
		t.Fatalf("status %s", s.Status)
	}
}

// TestIndex_SleepAndWake: a run asleep keeps its summary and leaves its
// outline; Wake gives the outline back and the fold goes on.
func TestIndex_SleepAndWake(t *testing.T) {
	t.Parallel()
	x := runindex.New()
	x.Register("t1", "r1", "s1", "why", time.Unix(0, 0))
	plan := &messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}}}, Waves: [][]string{{"a"}}}
	gate := &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptPlanApproval}
	x.Apply("t1", env(1, "r1", &messages.RunStartedPayload{Question: "why"}))
	x.Apply("t1", env(2, "r1", plan))
	x.Apply("t1", env(3, "r1", gate))
	if !x.Asleep("r1", time.Unix(63, 0), time.Minute) || x.Asleep("r1", time.Unix(62, 0), time.Minute) || x.Interrupts("r1") != 1 {
		t.Fatal("parked for a minute, and not before, with its one interrupt")
	}
	before, _ := x.Get("t1", "r1")
	x.Sleep("r1")
	asleep, ok := x.Get("t1", "r1")
	if !ok || asleep.LastSeq != 3 || asleep.Status != before.Status || asleep.Waves != 1 || x.LastSeq("r1") != 3 {
		t.Fatalf("asleep: %+v, want %+v", asleep, before)
	}
	if x.Asleep("r1", time.Unix(1000, 0), time.Minute) || x.Interrupts("r1") != 0 {
		t.Fatal("a run asleep is asked to sleep again")
	}
	outline := runstateOutline(t, plan, gate)
	x.Wake("r1", outline)
	x.Apply("t1", env(4, "r1", &messages.InterruptResolvedPayload{InterruptID: "i1", Decision: messages.DecisionApprove}))
	x.Apply("t1", env(5, "r1", &messages.PlanApprovedPayload{}))
	if got, _ := x.Get("t1", "r1"); got.Status != messages.StatusRunning || got.LastSeq != 5 {
		t.Fatalf("woken: %+v", got)
	}
}

// runstateOutline folds a run's events (run_started, then ps) into an
// outline, as waking a run does.
func runstateOutline(t *testing.T, ps ...messages.Payload) *runstate.Run {
	t.Helper()
	r := runstate.NewOutline("r1")
	r.Apply(env(1, "r1", &messages.RunStartedPayload{Question: "why"}))
	for i, p := range ps {
		r.Apply(env(uint64(i+2), "r1", p))
	}
	return r
}
