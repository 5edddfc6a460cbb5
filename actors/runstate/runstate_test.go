package runstate

import (
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// fold applies events in order, numbering them.
type fold struct {
	t   *testing.T
	r   *Run
	seq uint64
}

func newFold(t *testing.T) *fold { return &fold{t: t, r: New("run-1")} }

func (f *fold) on(agent string, lane messages.Lane, p messages.Payload) *fold {
	f.seq++
	f.r.Apply(&messages.Envelope{Seq: f.seq, Type: p.EventType(), RunID: "run-1", AgentID: agent, Lane: lane, Payload: p})
	return f
}

var (
	run = messages.RunLane()
	// A plan: a → b, c (wave 0: a; wave 1: b, c); c is a team node.
	plan = messages.Plan{Nodes: []messages.PlanNode{
		{ID: "a", Goal: "A"},
		{ID: "b", Goal: "B", Deps: []string{"a"}},
		{ID: "c", Goal: "C", Deps: []string{"a"}, Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "x", Goal: "X"}}}},
	}}
	waves = [][]string{{"a"}, {"b", "c"}}
)

func nodeLane(g messages.Lane, id string) messages.Lane { return g.Child(messages.NodeStream(id)) }

func TestApply_WavesAndNodes(t *testing.T) {
	f := newFold(t).
		on("supervisor", run, &messages.RunStartedPayload{Question: "q", Tenant: "t1"}).
		on("director", run.Child(messages.DirectorStream), &messages.PlanningStartedPayload{}).
		on("director", run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: plan, Waves: waves}).
		on("supervisor", run, &messages.PlanApprovedPayload{})
	r := f.r
	g := r.GraphOf(messages.RunStream)
	if g == nil || g != r.Graph || g.Wave != -1 || g.InWave() || len(r.Lanes) != 0 || !r.GateDecided || r.Tenant != "t1" {
		t.Fatalf("after the plan: graph %+v, lanes %d", g, len(r.Lanes))
	}
	if g.Fixed("a") || !g.Has("b") || g.Has("zz") || g.PlanNode("c").Kind != messages.KindTeam {
		t.Fatal("plan lookups")
	}

	f.on("supervisor", run, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a"}}).
		on("a", nodeLane(run, "a"), &messages.NodeStartedPayload{NodeID: "a"}).
		on("a", nodeLane(run, "a"), &messages.TextDeltaPayload{Delta: "hel"}).
		on("a", nodeLane(run, "a"), &messages.TextDeltaPayload{Delta: "lo"})
	if !g.InWave() || !g.Fixed("a") || g.Fixed("b") || g.Node("a").State != Running || r.Lanes["node:a"].Text.String() != "hello" {
		t.Fatalf("mid-wave: %+v %+v", g, g.Node("a"))
	}
	spawn := &messages.SpawnRequest{Goal: "deeper", Roles: []string{"critic"}}
	cite := []messages.Citation{{URL: "https://x.test"}}
	f.on("a", nodeLane(run, "a"), &messages.NodeCompletedPayload{NodeID: "a", Output: "out-a", Citations: cite, Spawn: spawn}).
		on("supervisor", run, &messages.WaveCompletedPayload{Wave: 0, Completed: 1})
	n := g.Node("a")
	if n.State != Completed || n.Output != "out-a" || len(n.Cites) != 1 || n.Spawn != spawn || g.InWave() || r.Lanes["node:a"] != nil {
		t.Fatalf("after wave 0: %+v", n)
	}
	if c := g.Counts(); c != (messages.NodeCounts{Total: 3, Completed: 1}) {
		t.Fatalf("counts %+v", c)
	}
	if len(g.Nodes) != 1 {
		t.Fatalf("Counts created node entries: %v", g.Nodes)
	}

	// A sub-team joins the plan at the boundary: a's progress stays, its
	// spawn request is decided.
	grown := plan
	grown.Nodes = append(append([]messages.PlanNode(nil), plan.Nodes...), messages.PlanNode{ID: "a.team", Deps: []string{"a"}, Kind: messages.KindTeam,
		Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "r1", Goal: "critic"}}}})
	f.on("supervisor", run, &messages.SubteamSpawnedPayload{ParentNodeID: "a", TeamID: "a.team", Plan: grown, Waves: [][]string{{"a"}, {"b", "c", "a.team"}}})
	if !g.Has("a.team") || g.Node("a").State != Completed || g.Node("a").Spawn != nil || g.StartedWaves()["a"] != 0 || len(g.StartedWaves()) != 1 {
		t.Fatalf("after the spawn: %+v", g)
	}

	// Wave 1: b is skipped, c fails: the graph is failing.
	f.on("supervisor", run, &messages.WaveStartedPayload{Wave: 1}).
		on("b", nodeLane(run, "b"), &messages.NodeSkippedPayload{NodeID: "b", Reason: "r"}).
		on("c", nodeLane(run, "c"), &messages.NodeStartedPayload{NodeID: "c", Kind: messages.KindTeam}).
		on("c", nodeLane(run, "c"), &messages.NodeFailedPayload{NodeID: "c", Error: "boom"})
	if g.Node("b").State != Skipped || g.Node("c").State != Failed || !r.Failing() || g.FailMsg != "node c failed: boom" {
		t.Fatalf("wave 1: %+v", g)
	}
	f.on("supervisor", run, &messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed})
	if !r.Ended || r.LastSeq != f.seq || r.Events != int64(f.seq) {
		t.Fatalf("end: %+v", r)
	}
}

func TestApply_TeamGraphAndSplit(t *testing.T) {
	cl := nodeLane(run, "c")
	team := messages.Plan{Nodes: []messages.PlanNode{{ID: "c/x", Goal: "X"}, {ID: "c/y", Goal: "Y"}}}
	tool := cl.Child(messages.NodeStream("c/x"))
	f := newFold(t).
		on("director", run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: plan, Waves: waves}).
		on("supervisor", run, &messages.PlanApprovedPayload{}).
		on("supervisor", run, &messages.WaveStartedPayload{Wave: 0}).
		on("c", cl, &messages.NodeStartedPayload{NodeID: "c", Kind: messages.KindTeam}).
		on("c", cl, &messages.TeamStartedPayload{TeamID: "c", Plan: team, Waves: [][]string{{"c/x", "c/y"}}}).
		on("c", cl, &messages.WaveStartedPayload{Wave: 0, Team: "c"}).
		on("c/x", tool, &messages.NodeStartedPayload{NodeID: "c/x"}).
		on("c/x", tool, &messages.InterruptRaisedPayload{InterruptID: "i-tool", Kind: messages.InterruptToolApproval, CallID: "k1"}).
		on("c", cl, &messages.InterruptRaisedPayload{InterruptID: "i-gate", Kind: messages.InterruptNodeApproval, NodeID: "c/y"}).
		on("supervisor", run, &messages.InterruptRaisedPayload{InterruptID: "i-run", Kind: messages.InterruptNodeApproval, NodeID: "b"})
	r := f.r
	tg := r.GraphOf(cl.StreamID)
	if tg == nil || tg.Team != "c" || r.Graph.Node("c").Team != tg || r.Graph.Node("c").State != Running || !tg.InWave() {
		t.Fatalf("team graph %+v", tg)
	}
	if r.PendingGate(messages.InterruptNodeApproval, "c/y", cl.StreamID) == nil || r.InterruptOn(tool.StreamID) == nil {
		t.Fatal("interrupts not found")
	}

	s := r.Split(cl.StreamID)
	if s == nil || s.GraphOf(cl.StreamID) != tg || r.GraphOf(cl.StreamID) != nil {
		t.Fatal("the team graph did not move")
	}
	if s.Lanes[tool.StreamID] == nil || r.Lanes[tool.StreamID] != nil || r.Lanes[cl.StreamID] == nil {
		t.Fatalf("lanes: split %v, left %v", s.Lanes, r.Lanes)
	}
	if s.Interrupts["i-tool"] == nil || s.Interrupts["i-gate"] == nil || s.Interrupts["i-run"] != nil || r.Interrupts["i-run"] == nil || len(r.Interrupts) != 1 {
		t.Fatalf("interrupts: split %v, left %v", s.Interrupts, r.Interrupts)
	}
	if r.Split(cl.StreamID) != nil {
		t.Fatal("split twice")
	}
	// Each state goes on with its own events.
	(&fold{t: t, r: s, seq: f.seq}).on("c/x", tool, &messages.NodeCompletedPayload{NodeID: "c/x", Output: "ox"})
	if tg.Node("c/x").State != Completed {
		t.Fatal("the team's state does not apply its events")
	}
	f.on("c", cl, &messages.NodeCompletedPayload{NodeID: "c", Output: "oc"})
	if r.Graph.Node("c").State != Completed || r.Lanes[cl.StreamID] != nil {
		t.Fatal("the run's state does not apply the team's closing")
	}
}

func TestApply_Debate(t *testing.T) {
	dl := nodeLane(run, "a")
	turn := dl.Child(messages.DebateTurnStream("a", 1, "a1"))
	judge := dl.Child(messages.JudgeStream("a", 1))
	synth := dl.Child(messages.SynthesisStreamOf("a"))
	f := newFold(t).
		on("director", run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: plan, Waves: waves}).
		on("a", dl, &messages.NodeStartedPayload{NodeID: "a", Kind: messages.KindDebate}).
		on("a", dl, &messages.DebateRoundStartedPayload{Round: 1}).
		on("a1", turn, &messages.DebateTurnStartedPayload{NodeID: "a", AgentID: "a1", Round: 1})
	d := f.r.Graph.Node("a").Debate
	if d == nil || d.Round != 1 || d.Open == nil || d.Open.Agent != "a1" {
		t.Fatalf("debate %+v", d)
	}
	f.on("a1", turn, &messages.DebateTurnCompletedPayload{NodeID: "a", AgentID: "a1", Round: 1, Text: "t1", Stance: messages.StanceHeld}).
		on("judge", judge, &messages.DebateJudgeStartedPayload{NodeID: "a", Round: 1}).
		on("judge", judge, &messages.DebateJudgeSummaryPayload{NodeID: "a", Round: 1, Cancelled: true})
	if len(d.Turns) != 1 || d.Turns[0].Text != "t1" || d.Open != nil || d.Judged != nil {
		t.Fatalf("after round 1: %+v", d)
	}
	f.on("a", synth, &messages.SynthesisStartedPayload{}).
		on("a", synth, &messages.SynthesisCompletedPayload{Answer: "verdict"})
	if d.Synthesis.Answer == nil || *d.Synthesis.Answer != "verdict" || d.Open != nil || f.r.Graph.Synthesis.Started {
		t.Fatalf("debate synthesis: %+v, run synthesis %+v", d.Synthesis, f.r.Graph.Synthesis)
	}
}

func TestApply_RewindAndSteering(t *testing.T) {
	f := newFold(t).on("supervisor", run, &messages.RunRewoundPayload{From: "run-0", Wave: 1, Plan: plan, Waves: waves,
		Reused: []messages.ReusedNode{{NodeID: "a", Output: "old-a"}}})
	g := f.r.Graph
	if g.Wave != 0 || !g.WaveDone || !g.Fixed("a") || g.Fixed("b") || g.Node("a").Output != "old-a" || g.Node("a").State != Completed {
		t.Fatalf("rewound: %+v", g)
	}
	sl := run.Child(messages.SteeringStream("s1"))
	edited := messages.Plan{Nodes: append(append([]messages.PlanNode(nil), plan.Nodes...), messages.PlanNode{ID: "d", Goal: "D"})}
	f.on("steering", sl, &messages.SteeringReceivedPayload{SteeringID: "s1", Note: "add d"})
	if f.r.Steering["s1"] == nil {
		t.Fatal("note not open")
	}
	f.on("steering", sl, &messages.SteeringAppliedPayload{SteeringID: "s1", Plan: edited, Waves: [][]string{{"a"}, {"b", "c", "d"}}})
	if f.r.Steering["s1"] != nil || !g.Has("d") || g.Node("a").Output != "old-a" {
		t.Fatalf("steered: %+v", g)
	}
}

// TestApply_SpawnGateDecisions: a spawn gate's decision is part of the
// state, so that recovery neither asks again for a request a human
// rejected, nor asks again for one already approved (found by testkit/sim,
// seed 1108: a rejected sub-team was asked for again after a restart, and
// the gate that was open came back under a new interrupt id).
func TestApply_SpawnGateDecisions(t *testing.T) {
	spawn := &messages.SpawnRequest{Goal: "deeper", Roles: []string{"critic"}}
	flat := messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d", Deps: []string{"a"}}}}
	f := newFold(t).
		on("supervisor", run, &messages.RunStartedPayload{Question: "q"}).
		on("director", run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: flat, Waves: [][]string{{"a", "b", "c"}, {"d"}}}).
		on("supervisor", run, &messages.PlanApprovedPayload{}).
		on("supervisor", run, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a", "b", "c"}})
	for _, id := range []string{"a", "b", "c"} {
		f.on(id, nodeLane(run, id), &messages.NodeStartedPayload{NodeID: id}).
			on(id, nodeLane(run, id), &messages.NodeCompletedPayload{NodeID: id, Output: id, Spawn: spawn})
	}
	f.on("supervisor", run, &messages.WaveCompletedPayload{Wave: 0, Completed: 3})
	gate := func(id, node string) {
		f.on("supervisor", run, &messages.InterruptRaisedPayload{InterruptID: id, Kind: messages.InterruptSpawnApproval, NodeID: node})
	}
	gate("i1", "a")
	f.on("supervisor", run, &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptSpawnApproval, Decision: messages.DecisionReject})
	gate("i2", "b")
	f.on("supervisor", run, &messages.InterruptResolvedPayload{InterruptID: "i2", Kind: messages.InterruptSpawnApproval, Decision: messages.DecisionApprove})
	gate("i3", "c")
	g := f.r.Graph
	if a := g.Node("a"); a.Spawn != nil || a.SpawnApproved {
		t.Errorf("rejected request still there: %+v", a)
	}
	if b := g.Node("b"); b.Spawn == nil || !b.SpawnApproved {
		t.Errorf("approved request: %+v", b)
	}
	if c := g.Node("c"); c.Spawn == nil || c.SpawnApproved || f.r.PendingGate(messages.InterruptSpawnApproval, "c", messages.RunStream) == nil {
		t.Errorf("open gate: %+v", c)
	}
	f.on("supervisor", run, &messages.SubteamSpawnedPayload{ParentNodeID: "b", TeamID: "b.team", Plan: flat, Waves: [][]string{{"a", "b", "c"}, {"d"}}})
	if b := g.Node("b"); b.Spawn != nil || b.SpawnApproved {
		t.Errorf("spawned: %+v", b)
	}
}

// TestParked: a run is parked while everything it does waits on a human,
// and not otherwise.
func TestParked(t *testing.T) {
	t.Run("state", func(t *testing.T) { testParked(t, New) })
	t.Run("outline", func(t *testing.T) { testParked(t, NewOutline) })
}

func testParked(t *testing.T, newRun func(messages.RunID) *Run) {
	flat := messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}, {ID: "b"}, {ID: "d", Kind: messages.KindDebate}}}
	dir := run.Child(messages.DirectorStream)
	la, lb := nodeLane(run, "a"), nodeLane(run, "b")
	raise := func(id string, kind messages.InterruptKind, node string) *messages.InterruptRaisedPayload {
		return &messages.InterruptRaisedPayload{InterruptID: id, Kind: kind, NodeID: node}
	}
	f := (&fold{t: t, r: newRun("run-1")}).
		on("supervisor", run, &messages.RunStartedPayload{Question: "q"}).
		on("director", dir, &messages.PlanningStartedPayload{})
	if f.r.Parked() {
		t.Fatal("parked while planning")
	}
	// The director asks a question: its one lane is parked.
	f.on("director", dir, raise("i0", messages.InterruptInfoRequest, ""))
	if !f.r.Parked() {
		t.Fatal("not parked on the director's question")
	}
	f.on("director", dir, &messages.InterruptResolvedPayload{InterruptID: "i0", Decision: messages.DecisionApprove, Response: "x"})
	if f.r.Parked() {
		t.Fatal("parked once the question was answered")
	}
	// The plan gate: no lane open, one interrupt on the run lane.
	f.on("director", dir, &messages.PlanProposedPayload{Plan: flat, Waves: [][]string{{"a", "b", "d"}}}).
		on("supervisor", run, raise("i1", messages.InterruptPlanApproval, ""))
	if !f.r.Parked() {
		t.Fatal("not parked on the plan gate")
	}
	f.on("supervisor", run, &messages.InterruptResolvedPayload{InterruptID: "i1", Decision: messages.DecisionApprove}).
		on("supervisor", run, &messages.PlanApprovedPayload{}).
		on("supervisor", run, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a", "b"}}).
		on("a", la, &messages.NodeStartedPayload{NodeID: "a"}).
		on("a", la, raise("i2", messages.InterruptNodeApproval, "a")).
		on("b", lb, &messages.NodeStartedPayload{NodeID: "b"})
	if f.r.Parked() {
		t.Fatal("parked while node b works")
	}
	f.on("b", lb, raise("i3", messages.InterruptToolApproval, "b"))
	if !f.r.Parked() {
		t.Fatal("not parked on a node gate and a tool approval")
	}
	// A sub-agent, even a parked one, is not given back by recovery.
	sub := lb.Child(messages.SubagentStream(lb.StreamID, "s1"))
	f.on("s1", sub, &messages.SubagentStartedPayload{SubagentID: "s1"}).
		on("s1", sub, raise("i4", messages.InterruptToolApproval, ""))
	if f.r.Parked() {
		t.Fatal("parked with a sub-agent")
	}
	f.on("s1", sub, &messages.InterruptResolvedPayload{InterruptID: "i4", Decision: messages.DecisionReject}).
		on("s1", sub, &messages.SubagentFinishedPayload{SubagentID: "s1", Outcome: messages.OutcomeCancelled})
	if !f.r.Parked() {
		t.Fatal("not parked once the sub-agent finished")
	}
	// A steering note waits: not parked.
	sl := run.Child(messages.SteeringStream("s1"))
	f.on("steering", sl, &messages.SteeringReceivedPayload{SteeringID: "s1", Note: "n"})
	if f.r.Parked() {
		t.Fatal("parked with a steering note")
	}
	f.on("steering", sl, &messages.SteeringRejectedPayload{SteeringID: "s1", Error: "no"})
	// A running debate node: not parked, even with every lane parked.
	ld := nodeLane(run, "d")
	f.on("d", ld, &messages.NodeStartedPayload{NodeID: "d", Kind: messages.KindDebate}).
		on("d", ld, raise("i5", messages.InterruptNodeApproval, "d"))
	if f.r.Parked() {
		t.Fatal("parked with a running debate")
	}
	f.on("d", ld, &messages.NodeCancelledPayload{NodeID: "d", Reason: "x"})
	if f.r.Parked() {
		t.Fatal("parked while failing")
	}
	// An accepted abort: ending.
	g := (&fold{t: t, r: newRun("run-1")}).on("supervisor", run, &messages.RunStartedPayload{Question: "q"}).
		on("director", dir, &messages.PlanningStartedPayload{}).
		on("director", dir, &messages.PlanProposedPayload{Plan: flat, Waves: [][]string{{"a", "b"}}}).
		on("supervisor", run, raise("i1", messages.InterruptPlanApproval, ""))
	if !g.r.Parked() {
		t.Fatal("not parked on the plan gate")
	}
	g.on("supervisor", run, &messages.RunAbortRequestedPayload{Reason: "stop"})
	if g.r.Parked() {
		t.Fatal("parked with an accepted abort")
	}
}

// TestApply_Spend: token_usage adds up per model, and its cost_usd; a
// turn without one (an unpriced model) is named, not counted as free.
func TestApply_Spend(t *testing.T) {
	cost := func(v float64) *float64 { return &v }
	lane := run.Child(messages.DirectorStream)
	f := newFold(t).
		on("director", lane, &messages.TokenUsagePayload{Model: "a", Turn: 1, Usage: messages.Usage{InputTokens: 10, OutputTokens: 5}, CostUSD: cost(0.25)}).
		on("director", lane, &messages.TokenUsagePayload{Model: "a", Turn: 2, Usage: messages.Usage{InputTokens: 1, OutputTokens: 1}, CostUSD: cost(0.5)})
	if r := f.r; r.CostUSD != 0.75 || r.Unpriced != "" || r.UsageByModel["a"] != (messages.Usage{InputTokens: 11, OutputTokens: 6}) {
		t.Fatalf("spend: cost %v, unpriced %q, by model %+v", r.CostUSD, r.Unpriced, r.UsageByModel)
	}
	f.on("director", lane, &messages.TokenUsagePayload{Model: "b", Turn: 3, Usage: messages.Usage{InputTokens: 7}})
	if r := f.r; r.CostUSD != 0.75 || r.Unpriced != "b" || r.UsageByModel["b"].InputTokens != 7 {
		t.Fatalf("after an unpriced turn: cost %v, unpriced %q", r.CostUSD, r.Unpriced)
	}
}

// TestApply_FilesBytes: file events add up to what a run resumed after a
// restart puts on its terminal event (files_bytes).
func TestApply_FilesBytes(t *testing.T) {
	f := newFold(t).
		on("supervisor", run, &messages.RunStartedPayload{Question: "q"}).
		on("a", nodeLane(run, "a"), &messages.FilePayload{Path: "x.md", Size: 40}).
		on("a", nodeLane(run, "a"), &messages.FilePayload{Path: "y.md", Size: 2})
	if f.r.FilesBytes != 42 {
		t.Fatalf("FilesBytes %d, want 42", f.r.FilesBytes)
	}
}

// TestApply_OutlineDropsFileBytes: an outline (the run index's) keeps a
// run's attached files without their bytes; the full state keeps them
// (recovery and rewind give them to the agents), and the event's payload
// is not changed.
func TestApply_OutlineDropsFileBytes(t *testing.T) {
	p := &messages.RunStartedPayload{Question: "q", Files: []messages.RunFile{{Name: "a.md", Size: 3, Data: []byte("abc")}}}
	env := &messages.Envelope{Seq: 1, Type: messages.RunStarted, RunID: "run-1", Lane: run, Payload: p}
	full, outline := New("run-1"), NewOutline("run-1")
	full.Apply(env)
	outline.Apply(env)
	if string(full.Started.Files[0].Data) != "abc" {
		t.Fatalf("full state files %+v", full.Started.Files)
	}
	if f := outline.Started.Files; len(f) != 1 || f[0].Name != "a.md" || f[0].Size != 3 || f[0].Data != nil {
		t.Fatalf("outline files %+v", f)
	}
	if string(p.Files[0].Data) != "abc" {
		t.Fatal("the event's payload was changed")
	}
}

// TestApply_RemoteTask: a remote node's lane keeps its task's first id,
// through agent_restarted (a restarted worker follows the same task).
func TestApply_RemoteTask(t *testing.T) {
	f := newFold(t).
		on("supervisor", run, &messages.RunStartedPayload{Question: "q"}).
		on("director", run.Child(messages.DirectorStream), &messages.PlanningStartedPayload{}).
		on("director", run.Child(messages.DirectorStream), &messages.PlanProposedPayload{Plan: plan, Waves: waves}).
		on("supervisor", run, &messages.PlanApprovedPayload{}).
		on("supervisor", run, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a"}}).
		on("a", nodeLane(run, "a"), &messages.NodeStartedPayload{NodeID: "a"}).
		on("a", nodeLane(run, "a"), &messages.RemoteTaskPayload{Agent: "helper", TaskID: "t1", ContextID: "c1", State: "TASK_STATE_SUBMITTED"}).
		on("a", nodeLane(run, "a"), &messages.RemoteTaskPayload{Agent: "helper", TaskID: "t1", ContextID: "c1", State: "TASK_STATE_WORKING"}).
		on("a", nodeLane(run, "a"), &messages.TextDeltaPayload{Delta: "partial"}).
		on("a", nodeLane(run, "a"), &messages.AgentRestartedPayload{Attempt: 2, Reason: "server restarted"})
	l := f.r.Lanes["node:a"]
	if l.RemoteTask != "t1" || l.RemoteContext != "c1" || l.Text.Len() != 0 || l.Attempts != 2 {
		t.Fatalf("lane after the restart: task %q context %q text %q attempts %d", l.RemoteTask, l.RemoteContext, l.Text.String(), l.Attempts)
	}
}
