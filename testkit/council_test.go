package testkit_test

import (
	"slices"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// Lanes of the council contract, spelled out literally (docs/events.md,
// Lanes) so that the tests pin the names, not a helper.

// nestedLane is the lane of node id (run-wide, "T/X") under its team's lane.
func nestedLane(team messages.Lane, id string) messages.Lane {
	return team.Child(messages.StreamID("node:" + id))
}

// synthLaneOf is the synthesis lane of team or debate node id.
func synthLaneOf(node messages.Lane, id string) messages.Lane {
	return node.Child(messages.StreamID("synthesis:" + id))
}

func turnLane(debate messages.Lane, id, round, agent string) messages.Lane {
	return debate.Child(messages.StreamID("debate:" + id + "/r" + round + "/" + agent))
}

func judgeLane(debate messages.Lane, id, round string) messages.Lane {
	return debate.Child(messages.StreamID("judge:" + id + "/r" + round))
}

func steerLane(id string) messages.Lane { return runLane.Child(messages.StreamID("steering:" + id)) }

func cite(n int, url, by string) messages.Citation {
	return messages.Citation{Number: n, URL: url, Title: "T" + url, FirstSeenBy: by}
}

// councilRun is a successful run with every council feature (the debate's
// configuration is returned so that a test can change it):
//
//   - wave 0: leaf a (a sub-agent that delegates again), and team t whose
//     nested plan is t/x (a sub-agent, advisor redirects) then team t/u
//     (one node t/u/z); two steering notes arrive;
//   - boundary: citations 1 and 2, a's sub-team a.team is spawned, note s1
//     is applied (adds leaf e), note s2 is rejected;
//   - wave 1: team a.team and leaf e; wave 2: debate d (agents pro and
//     con, two rounds, a judge that stops early in round 2, con shifts and
//     dissents);
//   - synthesis, run_finished with the citations.
func councilRun(id messages.RunID) ([]messages.Emit, *messages.DebateConfig) {
	cfg := &messages.DebateConfig{Agents: []messages.DebateAgent{{ID: "pro"}, {ID: "con"}}, Rounds: 2, Judge: true, CompactAfter: 1}
	a := messages.PlanNode{ID: "a", Goal: "facts"}
	t := messages.PlanNode{ID: "t", Goal: "team", Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{
		{ID: "x", Goal: "x"},
		{ID: "u", Goal: "u", Deps: []string{"x"}, Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "z", Goal: "z"}}}},
	}}}
	d := messages.PlanNode{ID: "d", Goal: "argue", Deps: []string{"a"}, Kind: messages.KindDebate, Debate: cfg}
	plan := messages.Plan{Nodes: []messages.PlanNode{a, t, d}}

	spawned := messages.PlanNode{ID: "a.team", Goal: "dig", Deps: []string{"a"}, Kind: messages.KindTeam,
		Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "r1", Goal: "research", Role: "researcher"}}}}
	d2 := d
	d2.Deps = []string{"a", "a.team"} // the worker's dependents also wait for its sub-team
	plan2 := messages.Plan{Nodes: []messages.PlanNode{a, t, d2, spawned}}
	waves2 := [][]string{{"a", "t"}, {"a.team"}, {"d"}}
	e := messages.PlanNode{ID: "e", Goal: "extra"}
	plan3 := messages.Plan{Nodes: []messages.PlanNode{a, t, d2, spawned, e}}
	waves3 := [][]string{{"a", "t"}, {"a.team", "e"}, {"d"}}

	tPlan := messages.Plan{Nodes: []messages.PlanNode{
		{ID: "t/x", Goal: "x"},
		{ID: "t/u", Goal: "u", Deps: []string{"t/x"}, Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "z", Goal: "z"}}}},
	}}
	uPlan := messages.Plan{Nodes: []messages.PlanNode{{ID: "t/u/z", Goal: "z"}}}
	atPlan := messages.Plan{Nodes: []messages.PlanNode{{ID: "a.team/r1", Goal: "research", Role: "researcher"}}}

	la, lt, ld, le, lat := nodeLane("a"), nodeLane("t"), nodeLane("d"), nodeLane("e"), nodeLane("a.team")
	lx, lu := nestedLane(lt, "t/x"), nestedLane(lt, "t/u")
	lz := nestedLane(lu, "t/u/z")
	lr1 := nestedLane(lat, "a.team/r1")
	subA := la.Child("node:a/sub:1")
	subA2 := subA.Child("node:a/sub:1/sub:1")
	subX := lx.Child("node:t/x/sub:1")
	s1, s2 := steerLane("s1"), steerLane("s2")
	c1, c2 := cite(1, "https://a.example/1", "a"), cite(2, "https://b.example/2", "t")

	b := newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "Why?", HITL: messages.HITLNone}).
		on(dirLane,
			&messages.PlanningStartedPayload{Question: "Why?"},
			&messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"a", "t"}, {"d"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 6, EstTokens: 12000, EstWallSeconds: 240},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a", "t"}}).
		on(s1, &messages.SteeringReceivedPayload{SteeringID: "s1", Note: "add e"}).
		on(s2, &messages.SteeringReceivedPayload{SteeringID: "s2", Note: "remove everything"}).
		on(la, &messages.NodeStartedPayload{NodeID: "a", Wave: 0, Goal: "facts"}).
		on(lt,
			&messages.NodeStartedPayload{NodeID: "t", Wave: 0, Goal: "team", Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "t", Depth: 1, Plan: tPlan, Waves: [][]string{{"t/x"}, {"t/u"}}},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t/x"}, Team: "t"}).
		on(lx, &messages.NodeStartedPayload{NodeID: "t/x", Wave: 0, Goal: "x"}).
		on(la, &messages.ToolCallStartedPayload{CallID: "c1", Tool: "delegate"}).
		on(subA, &messages.SubagentStartedPayload{SubagentID: "1", Task: "dig", CallID: "c1", Round: 1}).
		on(subA2, &messages.SubagentStartedPayload{SubagentID: "1", Task: "dig deeper", CallID: "c2", Round: 2, Async: true}).
		on(subX, &messages.SubagentStartedPayload{SubagentID: "1", Task: "check", CallID: "c3", Round: 1}).
		on(subA2, &messages.TextDeltaPayload{Delta: "deep"}, &messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeOK}).
		on(subX, &messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeOK}).
		on(subA, &messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeOK}).
		on(la, &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "delegate"}).
		on(lx,
			&messages.AdvisorPayload{Kind: messages.AdvisorRedirect, Detail: "cite sources", Redirects: 1},
			&messages.TextDeltaPayload{Delta: "X"},
			&messages.AdvisorPayload{Kind: messages.AdvisorContinue, Redirects: 1},
			&messages.NodeCompletedPayload{NodeID: "t/x", Output: "X"}).
		on(lt,
			&messages.WaveCompletedPayload{Wave: 0, Team: "t", Completed: 1},
			&messages.WaveStartedPayload{Wave: 1, NodeIDs: []string{"t/u"}, Team: "t"}).
		on(lu,
			&messages.NodeStartedPayload{NodeID: "t/u", Wave: 1, Goal: "u", Deps: []string{"t/x"}, Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "t/u", Depth: 2, Plan: uPlan, Waves: [][]string{{"t/u/z"}}},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t/u/z"}, Team: "t/u"}).
		on(lz, &messages.NodeStartedPayload{NodeID: "t/u/z", Wave: 0, Goal: "z"}, &messages.NodeCompletedPayload{NodeID: "t/u/z", Output: "Z"}).
		on(lu, &messages.WaveCompletedPayload{Wave: 0, Team: "t/u", Completed: 1}).
		on(synthLaneOf(lu, "t/u"), &messages.SynthesisStartedPayload{Inputs: 1}, &messages.SynthesisCompletedPayload{Answer: "U!"}).
		on(lu,
			&messages.TeamSynthesizedPayload{TeamID: "t/u", CompactedOutput: "U"},
			&messages.NodeCompletedPayload{NodeID: "t/u", Output: "U"}).
		on(lt, &messages.WaveCompletedPayload{Wave: 1, Team: "t", Completed: 1}).
		on(s1, &messages.TextDeltaPayload{Delta: "{add e}"}, &messages.TokenUsagePayload{Model: "scripted", Turn: 1}).
		on(synthLaneOf(lt, "t"), &messages.SynthesisStartedPayload{Inputs: 2}, &messages.TextDeltaPayload{Delta: "T"}, &messages.SynthesisCompletedPayload{Answer: "T!"}).
		on(lt,
			&messages.TeamSynthesizedPayload{TeamID: "t", CompactedOutput: "T"},
			&messages.NodeCompletedPayload{NodeID: "t", Output: "T"}).
		on(la, &messages.NodeCompletedPayload{NodeID: "a", Output: "A"}).
		on(runLane,
			&messages.WaveCompletedPayload{Wave: 0, Completed: 2},
			&messages.CitationAddedPayload{Citation: c1},
			&messages.CitationAddedPayload{Citation: c2},
			&messages.SubteamSpawnedPayload{ParentNodeID: "a", TeamID: "a.team", Goal: "dig", Roles: []string{"researcher"}, AppliedAtWave: 1, Plan: plan2, Waves: waves2}).
		on(s1, &messages.SteeringAppliedPayload{SteeringID: "s1", AppliedAtWave: 1, Plan: plan3, Waves: waves3,
			Diff: messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpAddNode, Node: &e}}}}).
		on(s2,
			&messages.WarningPayload{Code: "steering_rejected", Message: "the last node cannot be removed"},
			&messages.SteeringRejectedPayload{SteeringID: "s2", Error: "the last node cannot be removed"}).
		on(runLane, &messages.WaveStartedPayload{Wave: 1, NodeIDs: []string{"a.team", "e"}}).
		on(lat,
			&messages.NodeStartedPayload{NodeID: "a.team", Wave: 1, Goal: "dig", Deps: []string{"a"}, Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "a.team", Depth: 1, Plan: atPlan, Waves: [][]string{{"a.team/r1"}}}).
		on(le, &messages.NodeStartedPayload{NodeID: "e", Wave: 1, Goal: "extra"}).
		on(lat, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a.team/r1"}, Team: "a.team"}).
		on(lr1, &messages.NodeStartedPayload{NodeID: "a.team/r1", Wave: 0, Goal: "research", Role: "researcher"}).
		on(le, &messages.NodeCompletedPayload{NodeID: "e", Output: "E"}).
		on(lr1, &messages.NodeCompletedPayload{NodeID: "a.team/r1", Output: "R"}).
		on(lat, &messages.WaveCompletedPayload{Wave: 0, Team: "a.team", Completed: 1}).
		on(synthLaneOf(lat, "a.team"), &messages.SynthesisStartedPayload{Inputs: 1}, &messages.SynthesisCompletedPayload{Answer: "AT"}).
		on(lat,
			&messages.TeamSynthesizedPayload{TeamID: "a.team", CompactedOutput: "AT"},
			&messages.NodeCompletedPayload{NodeID: "a.team", Output: "AT"}).
		on(runLane,
			&messages.WaveCompletedPayload{Wave: 1, Completed: 2},
			&messages.WaveStartedPayload{Wave: 2, NodeIDs: []string{"d"}}).
		on(ld,
			&messages.NodeStartedPayload{NodeID: "d", Wave: 2, Goal: "argue", Deps: []string{"a", "a.team"}, Kind: messages.KindDebate},
			&messages.DebateRoundStartedPayload{NodeID: "d", Round: 1})
	for _, round := range []struct {
		n         string
		r         int
		con       messages.Stance
		consensus bool
	}{{"1", 1, messages.StanceHeld, false}, {"2", 2, messages.StanceShifted, true}} {
		if round.r == 2 {
			b.on(ld,
				&messages.DebateRoundStartedPayload{NodeID: "d", Round: 2},
				&messages.DebateRoundCompactedPayload{NodeID: "d", Round: 1, Summary: "r1"})
		}
		b.on(turnLane(ld, "d", round.n, "pro"),
			&messages.DebateTurnStartedPayload{NodeID: "d", AgentID: "pro", Round: round.r},
			&messages.TextDeltaPayload{Delta: "yes"},
			&messages.TokenUsagePayload{Model: "scripted", Turn: 1},
			&messages.DebateTurnCompletedPayload{NodeID: "d", AgentID: "pro", Round: round.r, Text: "yes", Stance: messages.StanceHeld}).
			on(turnLane(ld, "d", round.n, "con"),
				&messages.DebateTurnStartedPayload{NodeID: "d", AgentID: "con", Round: round.r},
				&messages.DebateTurnCompletedPayload{NodeID: "d", AgentID: "con", Round: round.r, Text: "no", Stance: round.con}).
			on(judgeLane(ld, "d", round.n),
				&messages.DebateJudgeStartedPayload{NodeID: "d", Round: round.r},
				&messages.TextDeltaPayload{Delta: "hmm"},
				&messages.DebateJudgeSummaryPayload{NodeID: "d", Round: round.r, Consensus: round.consensus, EarlyStop: round.consensus})
	}
	b.on(ld, &messages.DebateStanceMapPayload{NodeID: "d", Rounds: 2, Stances: []messages.AgentStance{
		{AgentID: "pro", Stance: messages.StanceHeld}, {AgentID: "con", Stance: messages.StanceShifted}}}).
		on(synthLaneOf(ld, "d"), &messages.SynthesisStartedPayload{Inputs: 4}, &messages.SynthesisCompletedPayload{Answer: "verdict"}).
		on(ld,
			&messages.DissentPayload{DissentID: "d-1", ConflictID: "d", DissentingAgentID: "con", Stance: messages.StanceShifted, Position: "no"},
			&messages.NodeCompletedPayload{NodeID: "d", Output: "verdict"}).
		on(runLane, &messages.WaveCompletedPayload{Wave: 2, Completed: 1}).
		on(synthLane, &messages.SynthesisStartedPayload{Inputs: 5}, &messages.SynthesisCompletedPayload{Answer: "answer"}).
		on(runLane, &messages.RunFinishedPayload{Answer: "answer", Citations: []messages.Citation{c1, c2}})
	return b.events, cfg
}

// haltRun is a run whose only node is halted by the advisor: first its
// sub-agent (gate_halt), then the node itself (gate_budget).
func haltRun(id messages.RunID) []messages.Emit {
	la := nodeLane("a")
	sub := la.Child("node:a/sub:1")
	return newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "?"}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"},
			&messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "a"}}}, Waves: [][]string{{"a"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 1},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a"}}).
		on(la, &messages.NodeStartedPayload{NodeID: "a"}).
		on(sub, &messages.SubagentStartedPayload{SubagentID: "1", Round: 1}).
		on(la, &messages.TextDeltaPayload{Delta: "waiting"}).
		on(sub,
			&messages.AdvisorPayload{Kind: messages.AdvisorHalt, Detail: "off topic"},
			&messages.EscalationPayload{Reason: "off topic"},
			&messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeFailed, Error: "halted"}).
		on(la,
			&messages.AdvisorPayload{Kind: messages.AdvisorRedirect, Redirects: 1},
			&messages.AdvisorPayload{Kind: messages.AdvisorBudget, Redirects: 1},
			&messages.EscalationPayload{Reason: "redirect budget spent"},
			&messages.NodeFailedPayload{NodeID: "a", Error: "advisor halt"}).
		on(runLane,
			&messages.WaveCompletedPayload{Wave: 0, Failed: 1},
			&messages.RunErrorPayload{Code: messages.ErrCodeAdvisorHalt}).
		events
}

// teamFailRun is a run whose team fails: t/x fails, t/y (which depends
// on it) is skipped without its wave starting, the team node fails, and
// no team_synthesized is needed.
func teamFailRun(id messages.RunID) []messages.Emit {
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "t", Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{
		{ID: "x"}, {ID: "y", Deps: []string{"x"}}}}}}}
	tPlan := messages.Plan{Nodes: []messages.PlanNode{{ID: "t/x"}, {ID: "t/y", Deps: []string{"t/x"}}}}
	lt := nodeLane("t")
	return newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "?"}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"t"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 2},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t"}}).
		on(lt,
			&messages.NodeStartedPayload{NodeID: "t", Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "t", Depth: 1, Plan: tPlan, Waves: [][]string{{"t/x"}, {"t/y"}}},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t/x"}, Team: "t"}).
		on(nestedLane(lt, "t/x"), &messages.NodeStartedPayload{NodeID: "t/x"}, &messages.NodeFailedPayload{NodeID: "t/x", Error: "model error"}).
		on(lt, &messages.WaveCompletedPayload{Wave: 0, Team: "t", Failed: 1}).
		on(nestedLane(lt, "t/y"), &messages.NodeSkippedPayload{NodeID: "t/y", Reason: "dependency failed", Dependency: "t/x"}).
		on(lt, &messages.NodeFailedPayload{NodeID: "t", Error: "node t/x failed"}).
		on(runLane,
			&messages.WaveCompletedPayload{Wave: 0, Failed: 1},
			&messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed}).
		events
}

// teamSpawnRun is a run whose team t has a worker t/x that spawns a
// sub-team: subteam_spawned is on the team's lane and changes the team's
// plan; the sub-team t/x.team runs one level deeper. When restart is set,
// the team's supervisor panics after its first team_started and runs again
// (agent_restarted, then team_started again).
func teamSpawnRun(id messages.RunID, restart bool) []messages.Emit {
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "t", Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}}}}}}
	tPlan := messages.Plan{Nodes: []messages.PlanNode{{ID: "t/x"}}}
	tPlan2 := messages.Plan{Nodes: []messages.PlanNode{{ID: "t/x"}, {ID: "t/x.team", Deps: []string{"t/x"}, Kind: messages.KindTeam,
		Team: &messages.Plan{Nodes: []messages.PlanNode{{ID: "r1"}}}}}}
	lt := nodeLane("t")
	lx, lxt := nestedLane(lt, "t/x"), nestedLane(lt, "t/x.team")
	b := newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "?"}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"t"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 1},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t"}}).
		on(lt, &messages.NodeStartedPayload{NodeID: "t", Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "t", Depth: 1, Plan: tPlan, Waves: [][]string{{"t/x"}}})
	if restart {
		b.on(lt,
			&messages.AgentRestartedPayload{Attempt: 2, Reason: "panic"},
			&messages.TeamStartedPayload{TeamID: "t", Depth: 1, Plan: tPlan, Waves: [][]string{{"t/x"}}})
	}
	return b.on(lt, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t/x"}, Team: "t"}).
		on(lx, &messages.NodeStartedPayload{NodeID: "t/x"}, &messages.NodeCompletedPayload{NodeID: "t/x", Output: "X"}).
		on(lt,
			&messages.WaveCompletedPayload{Wave: 0, Team: "t", Completed: 1},
			&messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptSpawnApproval, NodeID: "t/x"},
			&messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptSpawnApproval, Decision: messages.DecisionApprove},
			&messages.SubteamSpawnedPayload{ParentNodeID: "t/x", TeamID: "t/x.team", AppliedAtWave: 1, Plan: tPlan2, Waves: [][]string{{"t/x"}, {"t/x.team"}}},
			&messages.WaveStartedPayload{Wave: 1, NodeIDs: []string{"t/x.team"}, Team: "t"}).
		on(lxt,
			&messages.NodeStartedPayload{NodeID: "t/x.team", Wave: 1, Deps: []string{"t/x"}, Kind: messages.KindTeam},
			&messages.TeamStartedPayload{TeamID: "t/x.team", Depth: 2, Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "t/x.team/r1"}}},
				Waves: [][]string{{"t/x.team/r1"}}},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"t/x.team/r1"}, Team: "t/x.team"}).
		on(nestedLane(lxt, "t/x.team/r1"), &messages.NodeStartedPayload{NodeID: "t/x.team/r1"}, &messages.NodeCompletedPayload{NodeID: "t/x.team/r1", Output: "R"}).
		on(lxt, &messages.WaveCompletedPayload{Wave: 0, Team: "t/x.team", Completed: 1}).
		on(synthLaneOf(lxt, "t/x.team"), &messages.SynthesisStartedPayload{Inputs: 1}, &messages.SynthesisCompletedPayload{Answer: "R"}).
		on(lxt,
			&messages.TeamSynthesizedPayload{TeamID: "t/x.team", CompactedOutput: "R"},
			&messages.NodeCompletedPayload{NodeID: "t/x.team", Output: "R"}).
		on(lt, &messages.WaveCompletedPayload{Wave: 1, Team: "t", Completed: 1}).
		on(synthLaneOf(lt, "t"), &messages.SynthesisStartedPayload{Inputs: 2}, &messages.SynthesisCompletedPayload{Answer: "T"}).
		on(lt, &messages.TeamSynthesizedPayload{TeamID: "t", CompactedOutput: "T"}, &messages.NodeCompletedPayload{NodeID: "t", Output: "T"}).
		on(runLane, &messages.WaveCompletedPayload{Wave: 0, Completed: 1}).
		on(synthLane, &messages.SynthesisStartedPayload{Inputs: 1}, &messages.SynthesisCompletedPayload{Answer: "A"}).
		on(runLane, &messages.RunFinishedPayload{Answer: "A"}).
		events
}

// compactedTeam: node_compacting right before the team's team_synthesized.
func compactedTeam(t *testing.T) []messages.Emit {
	em := teamSpawnRun("r1", false)
	i := first[*messages.TeamSynthesizedPayload](t, em, "node:t")
	return slices.Insert(em, i, emit("r1", nodeLane("t"), &messages.NodeCompactingPayload{NodeID: "t"}))
}

// restartedBeforeTeamStarted: a crash between the team's node_started and
// its team_started; after the restart, agent_restarted and team_started.
func restartedBeforeTeamStarted(t *testing.T) []messages.Emit {
	em := teamSpawnRun("r1", true)
	i := first[*messages.TeamStartedPayload](t, em, "node:t")
	return slices.Delete(em, i, i+1)
}

// abortRecord is an accepted abort's journal record.
func abortRecord(id messages.RunID) messages.Emit {
	return emit(id, runLane, &messages.RunAbortRequestedPayload{Reason: "aborted by request"})
}

// abortedRun is validRun aborted before its end: the abort's record, then
// run_error{aborted} instead of run_finished.
func abortedRun(id messages.RunID) []messages.Emit {
	em := validRun(id)
	last := len(em) - 1
	em[last].Payload = &messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "aborted by request"}
	return slices.Insert(em, last, abortRecord(id))
}

func council(id messages.RunID) []messages.Emit {
	em, _ := councilRun(id)
	return em
}

func TestCheck_CouncilValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		emits []messages.Emit
	}{
		{"teams, spawn, steering, debate, citations", council("r1")},
		{"advisor halts", haltRun("r1")},
		{"team fails", teamFailRun("r1")},
		{"sub-team spawned inside a team", teamSpawnRun("r1", false)},
		{"team supervisor restarted", teamSpawnRun("r1", true)},
		{"team restarted between node_started and team_started", restartedBeforeTeamStarted(t)},
		{"team output compacted", compactedTeam(t)},
		{"interleaved", interleave(council("r1"), haltRun("r2"), teamFailRun("r3"), validRun("r4"), teamSpawnRun("r5", true))},
		{"aborted", abortedRun("r1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := stamp(tt.emits)
			if vs := testkit.Check(events); len(vs) != 0 {
				t.Errorf("Check: want no violations, got:%s", dump(vs))
			}
			if vs := testkit.CheckPartial(events); len(vs) != 0 {
				t.Errorf("CheckPartial: want no violations, got:%s", dump(vs))
			}
		})
	}
}

// TestCheckPartial_CouncilWindows: no window of a valid council stream is
// reported, whatever team, debate, steering or advisor sequence it cuts.
func TestCheckPartial_CouncilWindows(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		emits []messages.Emit
	}{
		{"council", council("r1")},
		{"plans rejected twice, then planned again", replans("r1", 2)},
		{"halt, team failure, spawn in a team", interleave(haltRun("r1"), teamFailRun("r2"), teamSpawnRun("r3", true))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := stamp(tt.emits)
			for i := range events {
				for j := i + 1; j <= len(events); j++ {
					if vs := testkit.CheckPartial(events[i:j]); len(vs) != 0 {
						t.Fatalf("window [%d:%d]: want no violations, got:%s", i, j, dump(vs))
					}
				}
			}
		})
	}
}

// at returns the position of the n-th (0-based) emit on stream that
// matches typ and ok (nil ok matches any payload).
func at[P messages.Payload](t *testing.T, emits []messages.Emit, stream messages.StreamID, n int, ok func(P) bool) int {
	t.Helper()
	for i, e := range emits {
		p, is := e.Payload.(P)
		if !is || e.Lane.StreamID != stream || (ok != nil && !ok(p)) {
			continue
		}
		if n == 0 {
			return i
		}
		n--
	}
	var zero P
	t.Fatalf("no %T on %s", zero, stream)
	return -1
}

func first[P messages.Payload](t *testing.T, emits []messages.Emit, stream messages.StreamID) int {
	t.Helper()
	return at[P](t, emits, stream, 0, nil)
}

func waveCompleted(w int, team string) func(*messages.WaveCompletedPayload) bool {
	return func(p *messages.WaveCompletedPayload) bool { return p.Wave == w && p.Team == team }
}

func waveStarted(w int, team string) func(*messages.WaveStartedPayload) bool {
	return func(p *messages.WaveStartedPayload) bool { return p.Wave == w && p.Team == team }
}

// TestCheck_CouncilViolations breaks one guarantee of the council contract
// per case and expects its rule; extra lists the other rules the same
// mistake is allowed to trip.
func TestCheck_CouncilViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		emits func(t *testing.T) []messages.Emit
		rule  string
		extra []string
	}{
		// cost-estimate
		{
			name: "no run_cost_estimate",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.RunCostEstimatePayload](t, em, "run")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleCostEstimate,
		},
		{
			name: "run_cost_estimate twice",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.RunCostEstimatePayload](t, em, "run")
				return slices.Insert(em, i+1, em[i])
			},
			rule: testkit.RuleCostEstimate,
		},
		{
			name: "run_cost_estimate after plan_approved",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.RunCostEstimatePayload](t, em, "run")
				return move(em, i, first[*messages.PlanApprovedPayload](t, em, "run")+1)
			},
			rule: testkit.RuleCostEstimate,
		},
		{
			name: "run_cost_estimate without plan_proposed",
			emits: func(t *testing.T) []messages.Emit {
				return newRun("r1").
					on(runLane, &messages.RunStartedPayload{Question: "?"}).
					on(dirLane, &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanningFailedPayload{Error: "no plan"}).
					on(runLane, &messages.RunCostEstimatePayload{}, &messages.RunErrorPayload{Code: messages.ErrCodePlanningFailed}).events
			},
			rule: testkit.RuleCostEstimate,
		},
		// team-order
		{
			name: "node_compacting before the team's synthesis",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamStartedPayload](t, em, "node:t")
				return slices.Insert(em, i+1, emit("r1", nodeLane("t"), &messages.NodeCompactingPayload{NodeID: "t"}))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team_started not right after node_started",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamStartedPayload](t, em, "node:t")
				return slices.Insert(em, i, emit("r1", nodeLane("t"), &messages.TextDeltaPayload{Delta: "early"}))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "nested team without team_started",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamStartedPayload](t, em, "node:t/u")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team_started on a leaf node's lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeStartedPayload](t, em, "node:e")
				return slices.Insert(em, i+1, emit("r1", nodeLane("e"), &messages.TeamStartedPayload{TeamID: "e", Depth: 1}))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team_synthesized before its synthesis lane closed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamSynthesizedPayload](t, em, "node:t")
				return move(em, i, first[*messages.SynthesisCompletedPayload](t, em, "synthesis:t"))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team synthesis before the team's last wave completed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SynthesisStartedPayload](t, em, "synthesis:t")
				return move(em, i, at(t, em, "node:t", 0, waveCompleted(1, "t")))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team node completes without team_synthesized",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamSynthesizedPayload](t, em, "node:a.team")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "event between team_synthesized and node_completed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamSynthesizedPayload](t, em, "node:t")
				return slices.Insert(em, i+1, emit("r1", nodeLane("t"), &messages.TokenUsagePayload{Model: "m"}))
			},
			rule: testkit.RuleTeamOrder,
		},
		{
			name: "team output differs from its compacted output",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "node:t", 0, func(p *messages.NodeCompletedPayload) bool { return p.NodeID == "t" })].Payload =
					&messages.NodeCompletedPayload{NodeID: "t", Output: "T, uncompacted"}
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "team_started depth is not its lane's",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.TeamStartedPayload](t, em, "node:t/u")].Payload.(*messages.TeamStartedPayload).Depth = 1
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "team_started lists a node outside the team",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				p := em[first[*messages.TeamStartedPayload](t, em, "node:a.team")].Payload.(*messages.TeamStartedPayload)
				p.Plan = messages.Plan{Nodes: []messages.PlanNode{{ID: "r1"}}}
				p.Waves = [][]string{{"r1"}}
				return em
			},
			rule:  testkit.RulePayloadConsistency,
			extra: []string{testkit.RuleDAGOrder, testkit.RuleWaveOrder}, // a.team/r1 is not in the plan listed
		},
		// lane-shape, dag-order and wave-order in a team's graph
		{
			name: "team wave on the run lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "node:t", 0, waveStarted(0, "t"))].Lane = runLane
				return em
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "nested node lane directly under run",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				for i := range em {
					if em[i].Lane.StreamID == "node:t/x" {
						em[i].Lane = nodeLane("t/x")
					}
				}
				return em
			},
			rule:  testkit.RuleLaneShape,
			extra: []string{testkit.RuleLaneDepth}, // its sub-agent's depth no longer follows
		},
		{
			name: "nested node lane one level too deep",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeStartedPayload](t, em, "node:t/u/z")
				em[i].Lane.Depth = 4
				return em
			},
			rule:  testkit.RuleLaneDepth,
			extra: []string{testkit.RuleLaneShape}, // its node_completed has depth 3
		},
		{
			name: "nested node starts although its dependency failed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.NodeCompletedPayload](t, em, "node:t/x")].Payload = &messages.NodeFailedPayload{NodeID: "t/x", Error: "x"}
				em[at(t, em, "node:t", 0, waveCompleted(0, "t"))].Payload = &messages.WaveCompletedPayload{Wave: 0, Team: "t", Failed: 1}
				return em
			},
			rule: testkit.RuleDAGOrder,
		},
		{
			name: "nested node outside its team's plan",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeStartedPayload](t, em, "node:t/x")
				lw := nestedLane(nodeLane("t"), "t/w")
				return slices.Insert(em, i,
					emit("r1", lw, &messages.NodeStartedPayload{NodeID: "t/w"}),
					emit("r1", lw, &messages.NodeCompletedPayload{NodeID: "t/w"}))
			},
			rule: testkit.RuleDAGOrder,
		},
		{
			name: "nested node starts before its team's wave",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := at(t, em, "node:t", 0, waveStarted(1, "t"))
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleWaveOrder,
		},
		{
			name: "team node closes with its wave open",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := at(t, em, "node:t", 0, waveCompleted(1, "t"))
				return slices.Delete(em, i, i+1)
			},
			rule:  testkit.RuleWaveOrder,
			extra: []string{testkit.RuleTeamOrder}, // its synthesis starts during the wave too
		},
		{
			name: "team wave_completed counts disagree",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "node:t/u", 0, waveCompleted(0, "t/u"))].Payload = &messages.WaveCompletedPayload{Wave: 0, Team: "t/u", Completed: 2}
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "node_started kind differs from the plan",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.NodeStartedPayload](t, em, "node:e")].Payload = &messages.NodeStartedPayload{NodeID: "e", Wave: 1, Kind: messages.KindDebate}
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		// debate-order
		{
			name: "debate rounds not consecutive",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "node:d", 1, (func(*messages.DebateRoundStartedPayload) bool)(nil))].Payload = &messages.DebateRoundStartedPayload{NodeID: "d", Round: 3}
				return em
			},
			rule:  testkit.RuleDebateOrder,
			extra: []string{testkit.RulePayloadConsistency}, // the stance map counts 2 rounds
		},
		{
			name: "debate turns out of agent order",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				from := first[*messages.DebateTurnStartedPayload](t, em, "debate:d/r1/con")
				to := first[*messages.DebateTurnStartedPayload](t, em, "debate:d/r1/pro")
				em = move(em, from+1, to) // con's completion, then its start, before pro's turn
				return move(em, from+1, to)
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "a restarted turn without debate_round_restarted",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateTurnCompletedPayload](t, em, "debate:d/r1/pro")
				p := *em[i].Payload.(*messages.DebateTurnCompletedPayload)
				p.Restarted = true
				em[i].Payload = &p
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "debate_round_restarted with no restarted turn",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateTurnStartedPayload](t, em, "debate:d/r1/pro")
				return slices.Insert(em, i, emit("r1", nodeLane("d"), &messages.DebateRoundRestartedPayload{NodeID: "d", Round: 1, Attempt: 2}))
			},
			rule:  testkit.RuleDebateOrder,
			extra: []string{testkit.RuleLaneShape, testkit.RulePayloadConsistency},
		},
		{
			name: "debate turns overlap",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				from := first[*messages.DebateTurnStartedPayload](t, em, "debate:d/r2/con")
				return move(em, from, first[*messages.DebateTurnCompletedPayload](t, em, "debate:d/r2/pro"))
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "round starts before the judge of the previous round",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateJudgeStartedPayload](t, em, "judge:d/r1")
				return slices.Delete(em, i, i+3)
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "judge before the round's last turn",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateJudgeStartedPayload](t, em, "judge:d/r1")
				em = move(em, i, first[*messages.DebateTurnStartedPayload](t, em, "debate:d/r1/con"))
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "round after an early stop",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				p := em[first[*messages.DebateJudgeSummaryPayload](t, em, "judge:d/r1")].Payload.(*messages.DebateJudgeSummaryPayload)
				p.Consensus, p.EarlyStop = true, true
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "more rounds than configured",
			emits: func(t *testing.T) []messages.Emit {
				em, cfg := councilRun("r1")
				cfg.Rounds = 1
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "fewer rounds than configured without an early stop",
			emits: func(t *testing.T) []messages.Emit {
				em, cfg := councilRun("r1")
				cfg.Rounds = 3
				em[first[*messages.DebateJudgeSummaryPayload](t, em, "judge:d/r2")].Payload.(*messages.DebateJudgeSummaryPayload).EarlyStop = false
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "early stop before min_rounds",
			emits: func(t *testing.T) []messages.Emit {
				em, cfg := councilRun("r1")
				cfg.MinRounds = 3
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "debate synthesis without a stance map",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateStanceMapPayload](t, em, "node:d")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "stance map twice",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DebateStanceMapPayload](t, em, "node:d")
				return slices.Insert(em, i+1, em[i])
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "stance map says another round count",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.DebateStanceMapPayload](t, em, "node:d")].Payload.(*messages.DebateStanceMapPayload).Rounds = 1
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "missing dissent",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DissentPayload](t, em, "node:d")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "dissent of an agent that held",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.DissentPayload](t, em, "node:d")].Payload.(*messages.DissentPayload).DissentingAgentID = "pro"
				return em
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "dissent before the debate's synthesis",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.DissentPayload](t, em, "node:d")
				return move(em, i, first[*messages.SynthesisStartedPayload](t, em, "synthesis:d"))
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "debate round on a leaf node's lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeStartedPayload](t, em, "node:e")
				return slices.Insert(em, i+1, emit("r1", nodeLane("e"), &messages.DebateRoundStartedPayload{NodeID: "e", Round: 1}))
			},
			rule: testkit.RuleDebateOrder,
		},
		{
			name: "debate turn lane not named after its round",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				for i := range em {
					if em[i].Lane.StreamID == "debate:d/r2/pro" {
						em[i].Lane = turnLane(nodeLane("d"), "d", "02", "pro")
					}
				}
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "synthesis lane of a leaf node",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeCompletedPayload](t, em, "node:e")
				sl := synthLaneOf(nodeLane("e"), "e")
				return slices.Insert(em, i,
					emit("r1", sl, &messages.SynthesisStartedPayload{}),
					emit("r1", sl, &messages.SynthesisCompletedPayload{}))
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "dissent on a team's lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.TeamSynthesizedPayload](t, em, "node:a.team")
				return slices.Insert(em, i, emit("r1", nodeLane("a.team"), &messages.DissentPayload{DissentingAgentID: "r1"}))
			},
			rule: testkit.RuleDebateOrder,
		},
		// spawn
		{
			name: "subteam_spawned before its parent's wave completed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SubteamSpawnedPayload](t, em, "run")
				return move(em, i, at(t, em, "run", 0, waveCompleted(0, "")))
			},
			rule: testkit.RuleSpawn,
		},
		{
			name: "spawned team does not depend on its parent",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				p := em[first[*messages.SubteamSpawnedPayload](t, em, "run")].Payload.(*messages.SubteamSpawnedPayload)
				p.Plan.Nodes = slices.Clone(p.Plan.Nodes)
				p.Plan.Nodes[3].Deps = nil
				return em
			},
			rule: testkit.RuleSpawn,
		},
		{
			name: "spawn changes a wave that already ran",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				p := em[first[*messages.SubteamSpawnedPayload](t, em, "run")].Payload.(*messages.SubteamSpawnedPayload)
				p.Waves = [][]string{{"t", "a"}, {"a.team"}, {"d"}}
				return em
			},
			rule:  testkit.RuleSpawn,
			extra: []string{testkit.RuleSteering}, // the next steering changes it back
		},
		{
			name: "subteam_spawned on its parent's lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SubteamSpawnedPayload](t, em, "run")
				em[i].Lane = nodeLane("a")
				return move(em, i, first[*messages.NodeCompletedPayload](t, em, "node:a"))
			},
			rule:  testkit.RuleLaneShape,
			extra: []string{testkit.RuleSpawn}, // and so it precedes its parent's completion
		},
		{
			name: "subteam_spawned of a team's worker on the run lane",
			emits: func(t *testing.T) []messages.Emit {
				em := teamSpawnRun("r1", false)
				em[first[*messages.SubteamSpawnedPayload](t, em, "node:t")].Lane = runLane
				return em
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "team wave restarts without a team restart",
			emits: func(t *testing.T) []messages.Emit {
				em := teamSpawnRun("r1", true)
				i := first[*messages.AgentRestartedPayload](t, em, "node:t")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleTeamOrder,
		},
		// steering
		{
			name: "steering_rejected without its warning",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.WarningPayload](t, em, "steering:s2")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleSteering,
		},
		{
			name: "tool call on a steering lane",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SteeringReceivedPayload](t, em, "steering:s1")
				return slices.Insert(em, i+1, emit("r1", steerLane("s1"), &messages.ToolCallStartedPayload{CallID: "x", Tool: "search"}))
			},
			rule: testkit.RuleSteering,
		},
		{
			name: "steering applied at a wave whose predecessor has not completed",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.SteeringAppliedPayload](t, em, "steering:s1")].Payload.(*messages.SteeringAppliedPayload).AppliedAtWave = 2
				return em
			},
			rule: testkit.RuleSteering,
		},
		{
			name: "steering applied after its wave started",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SteeringAppliedPayload](t, em, "steering:s1")
				em[i].Payload.(*messages.SteeringAppliedPayload).AppliedAtWave = 0
				return em
			},
			rule: testkit.RuleSteering,
		},
		{
			name: "steering lane not named after its steering_id",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.SteeringReceivedPayload](t, em, "steering:s2")].Payload = &messages.SteeringReceivedPayload{SteeringID: "s3"}
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "steering lane left open",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.SteeringRejectedPayload](t, em, "steering:s2")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleStreamsClosed,
		},
		// advisor-escalation
		{
			name: "advisor halt without escalation",
			emits: func(t *testing.T) []messages.Emit {
				em := haltRun("r1")
				i := first[*messages.EscalationPayload](t, em, "node:a/sub:1")
				return slices.Delete(em, i, i+1)
			},
			rule: testkit.RuleAdvisorOrder,
		},
		{
			name: "event between advisor halt and escalation",
			emits: func(t *testing.T) []messages.Emit {
				em := haltRun("r1")
				i := first[*messages.EscalationPayload](t, em, "node:a")
				return slices.Insert(em, i, emit("r1", nodeLane("a"), &messages.TextDeltaPayload{Delta: "more"}))
			},
			rule: testkit.RuleAdvisorOrder,
		},
		{
			name: "escalation closes with success",
			emits: func(t *testing.T) []messages.Emit {
				em := haltRun("r1")
				em[first[*messages.SubagentFinishedPayload](t, em, "node:a/sub:1")].Payload = &messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeOK}
				return em
			},
			rule: testkit.RuleAdvisorOrder,
		},
		{
			name: "escalation without a halt",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.NodeCompletedPayload](t, em, "node:t/x")
				return slices.Insert(em, i, emit("r1", nestedLane(nodeLane("t"), "t/x"), &messages.EscalationPayload{Reason: "?"}))
			},
			rule: testkit.RuleAdvisorOrder,
		},
		{
			name: "advisor on the run lane",
			emits: func(t *testing.T) []messages.Emit {
				em := haltRun("r1")
				i := first[*messages.PlanApprovedPayload](t, em, "run")
				return slices.Insert(em, i, emit("r1", runLane, &messages.AdvisorPayload{Kind: messages.AdvisorContinue}))
			},
			rule: testkit.RuleLaneShape,
		},
		// citations
		{
			name: "citation numbers skip one",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "run", 1, (func(*messages.CitationAddedPayload) bool)(nil))].Payload.(*messages.CitationAddedPayload).Number = 3
				return em
			},
			rule: testkit.RuleCitations,
		},
		{
			name: "citation url repeated",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[at(t, em, "run", 1, (func(*messages.CitationAddedPayload) bool)(nil))].Payload.(*messages.CitationAddedPayload).URL = "https://a.example/1"
				return em
			},
			rule: testkit.RuleCitations,
		},
		{
			name: "run_finished citations differ",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				p := em[first[*messages.RunFinishedPayload](t, em, "run")].Payload.(*messages.RunFinishedPayload)
				p.Citations = p.Citations[:1]
				return em
			},
			rule: testkit.RuleCitations,
		},
		{
			name: "citation added during a wave",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				i := first[*messages.CitationAddedPayload](t, em, "run")
				return move(em, i, at(t, em, "run", 0, waveCompleted(0, "")))
			},
			rule: testkit.RuleCitations,
		},
		// abort
		{
			name: "run_finished after an accepted abort",
			emits: func(t *testing.T) []messages.Emit {
				return slices.Insert(validRun("r1"), len(validRun("r1"))-1, abortRecord("r1"))
			},
			rule: testkit.RuleAbort,
		},
		{
			name: "run_error of another code after an accepted abort",
			emits: func(t *testing.T) []messages.Emit {
				em := abortedRun("r1")
				em[len(em)-1].Payload.(*messages.RunErrorPayload).Code = messages.ErrCodeNodeFailed
				return em
			},
			rule: testkit.RuleAbort,
		},
		{
			name: "two abort records",
			emits: func(t *testing.T) []messages.Emit {
				em := abortedRun("r1")
				return slices.Insert(em, len(em)-1, abortRecord("r1"))
			},
			rule: testkit.RuleAbort,
		},
		{
			name: "abort record on a node lane",
			emits: func(t *testing.T) []messages.Emit {
				em := abortedRun("r1")
				i := first[*messages.RunAbortRequestedPayload](t, em, "run")
				em[i].Lane = nodeLane("a")
				return em
			},
			rule:  testkit.RuleLaneShape,
			extra: []string{testkit.RuleStreamLifecycle, testkit.RuleAbort},
		},
		// signatures
		{
			name: "covered approval resolved with one signature of two",
			emits: func(t *testing.T) []messages.Emit {
				return coveredSpawn(t, []string{"a1"}, nil)
			},
			rule: testkit.RuleSignatures,
		},
		{
			name: "covered approval resolved by two signatures of the same approver",
			emits: func(t *testing.T) []messages.Emit {
				return coveredSpawn(t, []string{"a1", "a1"}, nil)
			},
			rule: testkit.RuleSignatures,
		},
		{
			name: "covered approval approved by its timeout",
			emits: func(t *testing.T) []messages.Emit {
				return coveredSpawn(t, []string{"a1"}, &messages.InterruptExpiredPayload{InterruptID: "i1", Kind: messages.InterruptSpawnApproval, Action: messages.DecisionApprove})
			},
			rule: testkit.RuleSignatures,
		},
		// sub-agent rounds
		{
			name: "nested sub-agent round is not its parent's + 1",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.SubagentStartedPayload](t, em, "node:a/sub:1/sub:1")].Payload.(*messages.SubagentStartedPayload).Round = 1
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "sub-agent of a nested node with round 0",
			emits: func(t *testing.T) []messages.Emit {
				em := council("r1")
				em[first[*messages.SubagentStartedPayload](t, em, "node:t/x/sub:1")].Payload.(*messages.SubagentStartedPayload).Round = 0
				return em
			},
			rule: testkit.RulePayloadConsistency,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vs := testkit.Check(stamp(tt.emits(t)))
			got := rulesOf(vs)
			if !slices.Contains(got, tt.rule) {
				t.Fatalf("want a %s violation, got:%s", tt.rule, dump(vs))
			}
			for _, r := range got {
				if r != tt.rule && !slices.Contains(tt.extra, r) {
					t.Errorf("unexpected %s violation besides %s:%s", r, tt.rule, dump(vs))
				}
			}
		})
	}
}

// coveredSpawn is teamSpawnRun with its spawn approval covered by a
// 2-of-n rule, approval_signature_added of approve by signers, and the
// interrupt's outcome replaced by outcome when it is set.
func coveredSpawn(t *testing.T, signers []string, outcome messages.Payload) []messages.Emit {
	em := teamSpawnRun("r1", false)
	i := first[*messages.InterruptRaisedPayload](t, em, "node:t")
	em[i].Payload.(*messages.InterruptRaisedPayload).Approval = &messages.ApprovalRequirement{EvidenceDigest: "sha256:d", Required: 2, RejectRequired: 1}
	var sigs []messages.Emit
	for _, a := range signers {
		sig := em[i]
		sig.Payload = &messages.ApprovalSignatureAddedPayload{InterruptID: "i1", Approver: a, Required: 2,
			Statement: messages.ApprovalStatement{InterruptID: "i1", EvidenceDigest: "sha256:d", Decision: messages.DecisionApprove}}
		sigs = append(sigs, sig)
	}
	if outcome != nil {
		em[i+1].Payload = outcome
	}
	return slices.Insert(em, i+1, sigs...)
}

// TestCheck_CoveredApprovalWithItsSignatures: the covered spawn approval
// with two distinct approvers' signatures is valid (an expiry that
// rejects is checked on real runs: actors TestGovernance_TimeoutNeverGrants).
func TestCheck_CoveredApprovalWithItsSignatures(t *testing.T) {
	t.Parallel()
	if vs := testkit.Check(stamp(coveredSpawn(t, []string{"a1", "a2"}, nil))); len(vs) != 0 {
		t.Fatal(vs)
	}
}
