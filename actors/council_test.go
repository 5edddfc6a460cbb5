package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// Scenario tests of issue 7's council and delegation behaviours. Each
// asserts the exact order of the events of the lanes it is about (lanes
// are deterministic per seed) and every invariant of docs/events.md.

// laneTypes lists the event types of one lane, in order.
func laneTypes(events []*messages.Envelope, lane messages.StreamID) []messages.EventType {
	var out []messages.EventType
	for _, env := range events {
		if env.Lane.StreamID == lane {
			out = append(out, env.Type)
		}
	}
	return out
}

func wantTypes(t *testing.T, what string, got []messages.EventType, want ...messages.EventType) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// without drops the streamed event types (deltas, usage) from a lane's types.
func without(types []messages.EventType, drop ...messages.EventType) []messages.EventType {
	return slices.DeleteFunc(slices.Clone(types), func(t messages.EventType) bool { return slices.Contains(drop, t) })
}

var streamed = []messages.EventType{messages.TurnStarted, messages.TextDelta, messages.ReasoningDelta, messages.TokenUsage}

func TestCouncil_TeamNode(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 4, Waves: 2, Teams: 1, TeamSize: 3, Tokens: 6}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Nodes.Completed != 4 {
		t.Fatalf("nodes = %+v", fin.Nodes)
	}
	wantTypes(t, "team lane", laneTypes(events, "node:n001"),
		messages.NodeStarted, messages.TeamStarted,
		messages.WaveStarted, messages.WaveCompleted, messages.WaveStarted, messages.WaveCompleted,
		messages.TeamSynthesized, messages.NodeCompleted)
	var started *messages.TeamStartedPayload
	var synth *messages.TeamSynthesizedPayload
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.TeamStartedPayload:
			started = p
		case *messages.TeamSynthesizedPayload:
			synth = p
		}
	}
	if started.Depth != 1 || len(started.Plan.Nodes) != 3 || started.Plan.Nodes[0].ID != "n001/m1" {
		t.Errorf("team_started = %+v", started)
	}
	if synth.CompactedOutput == "" || nodeOutput(events, "n001") != synth.CompactedOutput {
		t.Errorf("team output %q, node_completed output %q", synth.CompactedOutput, nodeOutput(events, "n001"))
	}
	// Nested lanes are one level deeper, under the team's lane.
	for _, env := range events {
		if env.Lane.StreamID == "node:n001/m1" && env.Type == messages.NodeStarted {
			if env.Lane.Depth != 2 || env.Lane.ParentStreamID != "node:n001" {
				t.Errorf("nested lane %+v", env.Lane)
			}
		}
	}
	// The team's output goes downstream like a leaf's.
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeStartedPayload); ok && slices.Contains(p.Deps, "n001") && !strings.Contains(p.NodeID, "/") {
			return
		}
	}
	t.Error("no node depends on the team node")
}

func TestCouncil_DebateStopsEarlyOnConsensus(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 6,
		Debate: &messages.DebateScenario{Agents: 3, Rounds: 4, Judge: true, MinRounds: 2, ConsensusRound: 1}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	// Consensus from round 1, but min_rounds 2: the debate stops after round 2.
	wantTypes(t, "debate lane", laneTypes(events, "node:n001"),
		messages.NodeStarted, messages.DebateRoundStarted, messages.DebateRoundStarted,
		messages.DebateStanceMap, messages.Dissent, messages.Dissent, messages.NodeCompleted)
	for r := 1; r <= 2; r++ {
		for _, a := range []string{"a1", "a2", "a3"} {
			lane := messages.DebateTurnStream("n001", r, a)
			types := laneTypes(events, lane)
			if len(types) < 3 || types[0] != messages.DebateTurnStarted || types[len(types)-1] != messages.DebateTurnCompleted ||
				!slices.Contains(types, messages.TextDelta) {
				t.Errorf("turn lane %s: %v", lane, types)
			}
		}
		wantTypes(t, "judge lane", without(laneTypes(events, messages.JudgeStream("n001", r)), streamed...),
			messages.DebateJudgeStarted, messages.DebateJudgeSummary)
	}
	// Debaters are shown with a name, a colour and their contentiousness.
	colors := map[string]bool{}
	for _, p := range payloads[*messages.DebateTurnStartedPayload](events) {
		if p.AgentName == "" || len(p.Color) != 7 || p.Color[0] != '#' || p.Contentiousness != messages.DefaultContentiousness {
			t.Errorf("debate_turn_started %+v", p)
		}
		colors[p.AgentID+p.Color] = true
	}
	if len(colors) != 3 {
		t.Errorf("agent colours %v, want one per agent", colors)
	}
	var stances []messages.AgentStance
	var dissenters []string
	for _, p := range payloads[*messages.DebateStanceMapPayload](events) {
		stances = p.Stances
	}
	for _, p := range payloads[*messages.DissentPayload](events) {
		dissenters = append(dissenters, p.DissentingAgentID)
		if p.ConflictID != "n001" || p.Position == "" {
			t.Errorf("dissent %+v", p)
		}
	}
	want := []messages.AgentStance{{AgentID: "a1", Stance: messages.StanceHeld}, {AgentID: "a2", Stance: messages.StanceShifted}, {AgentID: "a3", Stance: messages.StanceConceded}}
	if !slices.Equal(stances, want) || !slices.Equal(dissenters, []string{"a2", "a3"}) {
		t.Errorf("stances %v, dissenters %v", stances, dissenters)
	}
	judged := payloads[*messages.DebateJudgeSummaryPayload](events)
	if len(judged) != 2 || judged[0].EarlyStop || !judged[1].EarlyStop || !judged[0].Consensus {
		t.Errorf("judge summaries %+v", judged)
	}
	// The debate's verdict is the node's output.
	if out := nodeOutput(events, "n001"); out == "" || out != payloads[*messages.SynthesisCompletedPayload](events)[0].Answer {
		t.Errorf("debate output %q", out)
	}
}

func TestCouncil_DebateCompactsOldRounds(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Debate: &messages.DebateScenario{Agents: 2, Rounds: 5, CompactAfter: 2}}
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	var compacted []int
	for _, p := range payloads[*messages.DebateRoundCompactedPayload](events) {
		compacted = append(compacted, p.Round)
	}
	if !slices.Equal(compacted, []int{1, 2}) {
		t.Errorf("compacted rounds %v, want [1 2] (5 rounds, compact_after 2)", compacted)
	}
	if n := len(payloads[*messages.DebateRoundStartedPayload](events)); n != 5 {
		t.Errorf("%d rounds, want 5 (no judge)", n)
	}
}

func TestCouncil_SpawnSubteam(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		hitl     messages.HITLMode
		decision messages.Decision
		spawned  bool
	}{
		{"no gate", messages.HITLNone, "", true},
		{"gate approved", messages.HITLNode, messages.DecisionApprove, true},
		{"gate rejected", messages.HITLNode, messages.DecisionReject, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{})
			sc := messages.Scenario{Nodes: 4, Waves: 2, FanIn: 2, Tokens: 4, Spawn: messages.NodeSelector{IDs: []string{"n001"}}}
			ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", Scenario: &sc, HITL: tc.hitl},
				func(p *messages.InterruptRaisedPayload) messages.Resume {
					if p.Kind == messages.InterruptSpawnApproval {
						if p.NodeID != "n001" || len(p.SuggestedRoles) == 0 || strings.Contains(p.Goal, "roles") {
							t.Errorf("spawn gate for %q: goal %q, roles %v", p.NodeID, p.Goal, p.SuggestedRoles)
						}
						return messages.Resume{Decision: tc.decision}
					}
					return messages.Resume{Decision: messages.DecisionApprove}
				})
			testkit.AssertInvariants(t, events)
			fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			spawns := payloads[*messages.SubteamSpawnedPayload](events)
			if !tc.spawned {
				if len(spawns) != 0 || fin.Nodes.Total != 4 {
					t.Fatalf("rejected spawn ran: %d spawns, %+v", len(spawns), fin.Nodes)
				}
				return
			}
			if len(spawns) != 1 || spawns[0].ParentNodeID != "n001" || spawns[0].TeamID != "n001.team" || spawns[0].AppliedAtWave != 1 {
				t.Fatalf("subteam_spawned %+v", spawns)
			}
			if fin.Nodes.Total != 5 || fin.Nodes.Completed != 5 {
				t.Errorf("nodes %+v", fin.Nodes)
			}
			wantTypes(t, "sub-team lane", without(laneTypes(events, "node:n001.team"), messages.InterruptRaised, messages.InterruptResolved),
				messages.NodeStarted, messages.TeamStarted, messages.WaveStarted, messages.WaveCompleted,
				messages.TeamSynthesized, messages.NodeCompleted)
			// The spawning worker's dependents now wait for the sub-team too.
			for _, env := range events {
				if p, ok := env.Payload.(*messages.NodeStartedPayload); ok && slices.Contains(p.Deps, "n001") && p.NodeID != "n001.team" {
					if !slices.Contains(p.Deps, "n001.team") || p.Wave != 2 {
						t.Errorf("dependent %s: deps %v wave %d", p.NodeID, p.Deps, p.Wave)
					}
				}
			}
		})
	}
}

func TestCouncil_SteeringAppliedAtNextBoundary(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	add := &messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpAddNode, Node: &messages.PlanNode{ID: "extra", Goal: "costs", Deps: []string{"n001"}}}}}
	bad := &messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpRemoveNode, NodeID: "n001"}}} // n001 ran in wave 0: frozen
	sc := messages.Scenario{Nodes: 4, Waves: 2, Tokens: 4, Steering: []messages.SteeringScript{
		{AtWave: 0, Note: "add a costs node", Diff: add},
		{AtWave: 0, Note: "drop n001", Diff: bad},
		{AtWave: 0, Note: "look at history too"}, // the model adds a node for it
	}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Nodes.Total != 6 || fin.Nodes.Completed != 6 {
		t.Errorf("nodes %+v, want 6 (4 planned, 2 added by steering)", fin.Nodes)
	}
	applied := payloads[*messages.SteeringAppliedPayload](events)
	rejected := payloads[*messages.SteeringRejectedPayload](events)
	if len(applied) != 2 || len(rejected) != 1 || rejected[0].SteeringID != "scenario-2" {
		t.Fatalf("applied %d, rejected %+v", len(applied), rejected)
	}
	for _, a := range applied {
		if a.AppliedAtWave != 1 {
			t.Errorf("steering %s applied at wave %d, want 1", a.SteeringID, a.AppliedAtWave)
		}
	}
	wantTypes(t, "rejected steering lane", without(laneTypes(events, messages.SteeringStream("scenario-2")), streamed...),
		messages.SteeringReceived, messages.Warning, messages.SteeringRejected)
	// The diff's node and the note's node ran in wave 1.
	for _, id := range []string{"extra", scripted.SteerNodeID("look at history too")} {
		if nodeOutput(events, id) == "" {
			t.Errorf("steered node %s did not run", id)
		}
	}
}

// TestCouncil_SteerAPI posts a diff while the run waits at its plan gate.
// The supervisor is parked: the note is queued behind the gate's answer,
// reaches it as wave 0 starts, and applies at the boundary before wave 1.
func TestCouncil_SteerAPI(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 4}
	var steerID string
	ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", Scenario: &sc, HITL: messages.HITLPlan},
		func(p *messages.InterruptRaisedPayload) messages.Resume {
			ctx := context.Background()
			runs, _, _ := e.Runs(context.Background(), runindex.Filter{Tenant: messages.LocalTenant, Limit: 10})
			run := runs[0].RunID
			diff := &messages.GraphDiff{Ops: []messages.DiffOp{{Op: messages.OpSetRole, NodeID: "n003", Role: "auditor"}}}
			id, err := e.Steer(ctx, messages.Steer{RunID: run, SteerNote: messages.SteerNote{Note: "n003 audits", Diff: diff}})
			if err != nil {
				t.Errorf("Steer: %v", err)
			}
			steerID = id
			return messages.Resume{Decision: messages.DecisionApprove}
		})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	applied := payloads[*messages.SteeringAppliedPayload](events)
	if len(applied) != 1 || applied[0].SteeringID != steerID || applied[0].AppliedAtWave != 1 {
		t.Fatalf("applied %+v", applied)
	}
	for _, p := range payloads[*messages.NodeStartedPayload](events) {
		if p.NodeID == "n003" && p.Role != "auditor" {
			t.Errorf("n003 role %q", p.Role)
		}
	}
	if _, err := e.Steer(context.Background(), messages.Steer{RunID: ref.RunID, SteerNote: messages.SteerNote{Note: "late"}}); err == nil {
		t.Error("steering an ended run succeeded")
	}
}

func TestCouncil_AdvisorGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    messages.AdvisorOptions
		script  messages.AdvisorScenario
		lane    []messages.EventType // n001's lane, streamed events dropped
		code    messages.ErrorCode   // "" = finished
		advisor []messages.AdvisorKind
	}{
		{"redirect then continue", messages.AdvisorOptions{}, messages.AdvisorScenario{Redirects: 1},
			[]messages.EventType{messages.NodeStarted, messages.Advisor, messages.Advisor, messages.NodeCompleted}, "",
			[]messages.AdvisorKind{messages.AdvisorRedirect, messages.AdvisorContinue}},
		{"halt", messages.AdvisorOptions{}, messages.AdvisorScenario{Halt: messages.NodeSelector{IDs: []string{"n001"}}},
			[]messages.EventType{messages.NodeStarted, messages.Advisor, messages.Escalation, messages.NodeFailed}, messages.ErrCodeAdvisorHalt,
			[]messages.AdvisorKind{messages.AdvisorHalt}},
		{"budget", messages.AdvisorOptions{MaxRedirects: 2}, messages.AdvisorScenario{Redirects: 3},
			[]messages.EventType{messages.NodeStarted, messages.Advisor, messages.Advisor, messages.Advisor, messages.Escalation, messages.NodeFailed}, messages.ErrCodeAdvisorHalt,
			[]messages.AdvisorKind{messages.AdvisorRedirect, messages.AdvisorRedirect, messages.AdvisorBudget}},
		{"malformed halts", messages.AdvisorOptions{}, messages.AdvisorScenario{Malformed: messages.NodeSelector{IDs: []string{"n001"}}},
			[]messages.EventType{messages.NodeStarted, messages.Advisor, messages.Escalation, messages.NodeFailed}, messages.ErrCodeAdvisorHalt,
			[]messages.AdvisorKind{messages.AdvisorHalt}},
		{"malformed continues", messages.AdvisorOptions{MalformedContinues: true}, messages.AdvisorScenario{Malformed: messages.NodeSelector{IDs: []string{"n001"}}},
			[]messages.EventType{messages.NodeStarted, messages.Advisor, messages.NodeCompleted}, "",
			[]messages.AdvisorKind{messages.AdvisorContinue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{})
			script := tc.script
			sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Advisor: &script}
			opts := tc.opts
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Advisor: &opts, Concurrency: 1})
			testkit.AssertInvariants(t, events)
			wantTypes(t, "n001 lane", without(laneTypes(events, "node:n001"), streamed...), tc.lane...)
			var kinds []messages.AdvisorKind
			for _, env := range events {
				if p, ok := env.Payload.(*messages.AdvisorPayload); ok && env.Lane.StreamID == "node:n001" {
					kinds = append(kinds, p.Kind)
				}
			}
			if !slices.Equal(kinds, tc.advisor) {
				t.Errorf("advisor kinds %v, want %v", kinds, tc.advisor)
			}
			// Every model turn reports its usage, the advisor's too, and the
			// totals on the terminal event add them up.
			var sum messages.Usage
			advised := 0
			for _, env := range events {
				if p, ok := env.Payload.(*messages.TokenUsagePayload); ok {
					sum = sum.Add(p.Usage)
					if p.Role == "advisor" {
						advised++
					}
				}
			}
			if advised == 0 {
				t.Error("no token_usage of an advisor turn")
			}
			if tc.code == "" {
				if fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID); fin.Usage != sum {
					t.Errorf("run_finished usage %+v, token_usage total %+v", fin.Usage, sum)
				}
				return
			}
			if got := terminal[*messages.RunErrorPayload](t, events, ref.RunID); got.Code != tc.code {
				t.Errorf("run_error code %q, want %q", got.Code, tc.code)
			} else if got.Usage != sum {
				t.Errorf("run_error usage %+v, token_usage total %+v", got.Usage, sum)
			}
		})
	}
}

func TestCouncil_AsyncDelegation(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 8, Delegations: &messages.DelegationScenario{Async: 2}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	async := 0
	for _, p := range payloads[*messages.SubagentStartedPayload](events) {
		if p.Async && p.Round == 1 {
			async++
		}
	}
	if async != 4 {
		t.Errorf("%d async sub-agents, want 4", async)
	}
	// Every async tool ran and answered; the cancelled task closed as cancelled.
	tools := map[string]int{}
	for _, p := range payloads[*messages.ToolCallFinishedPayload](events) {
		tools[p.Tool]++
	}
	for _, name := range []string{model.ToolStartAsyncTask, model.ToolUpdateAsyncTask, model.ToolCheckAsyncTask, model.ToolListAsyncTasks, model.ToolCancelAsyncTask} {
		if tools[name] == 0 {
			t.Errorf("no %s call finished (%v)", name, tools)
		}
	}
	// The worker's own turns went on while its tasks ran: its next turn
	// started before it had every task's result (start returned at once).
	for _, p := range payloads[*messages.ToolCallFinishedPayload](events) {
		if p.Tool == model.ToolStartAsyncTask && !strings.Contains(p.Result, "task_id") {
			t.Errorf("start_async_task result %q", p.Result)
		}
	}
}

func TestCouncil_DelegationLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		depth, max int
		warnings   int
		code       messages.ErrorCode
	}{
		{depth: 2, max: 3, warnings: 0},
		{depth: 3, max: 3, warnings: 1},
		{depth: 5, max: 3, warnings: 1}, // once per chain, not at rounds 4 and 5 again
		{depth: 6, max: 3, warnings: 1, code: messages.ErrCodeDelegationLimit},
		{depth: 2, max: 1, warnings: 1, code: messages.ErrCodeDelegationLimit},
	} {
		t.Run(fmt.Sprintf("depth%d_max%d", tc.depth, tc.max), func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{})
			sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 4, SubagentsPerNode: 1, Delegations: &messages.DelegationScenario{Depth: tc.depth}}
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, MaxDelegationRounds: tc.max})
			testkit.AssertInvariants(t, events)
			warnings := 0
			for _, p := range payloads[*messages.WarningPayload](events) {
				if p.Code == "delegation_soft_limit" {
					warnings++
				}
			}
			if warnings != tc.warnings {
				t.Errorf("%d soft-limit warnings, want %d", warnings, tc.warnings)
			}
			if tc.code == "" {
				terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
				return
			}
			if got := terminal[*messages.RunErrorPayload](t, events, ref.RunID); got.Code != tc.code {
				t.Errorf("run_error %+v, want code %s", got, tc.code)
			}
		})
	}
}

func TestCouncil_CitationsDeduplicated(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 6, Waves: 2, Tokens: 4, ToolsPerNode: 3, SubagentsPerNode: 1, Delegations: &messages.DelegationScenario{Depth: 0}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	added := payloads[*messages.CitationAddedPayload](events)
	if len(added) == 0 || len(added) >= 6*3*2 {
		t.Fatalf("%d citations for 36 cited sources: not deduplicated", len(added))
	}
	urls := map[string]bool{}
	for i, c := range added {
		if c.Number != i+1 || urls[c.URL] {
			t.Errorf("citation %d: %+v", i, c)
		}
		urls[c.URL] = true
	}
	// Each carries when its first agent got it: before it was numbered.
	for _, env := range events {
		if c, ok := env.Payload.(*messages.CitationAddedPayload); ok && (c.FirstSeenAt.IsZero() || c.FirstSeenAt.After(env.Timestamp)) {
			t.Errorf("citation %d first seen at %v, added at %v", c.Number, c.FirstSeenAt, env.Timestamp)
		}
	}
	if len(fin.Citations) != len(added) || !strings.HasPrefix(fin.Sources, "## Sources") || !strings.Contains(fin.Sources, "\n[1] ") {
		t.Errorf("sources %q with %d citations", fin.Sources, len(fin.Citations))
	}
	// The synthesiser read each node's output with its sources' numbers.
	if !strings.Contains(fin.Answer, "Answer to: q") {
		t.Errorf("answer %q", fin.Answer)
	}
	// Same seed, same numbering, whatever order the parallel nodes finished in.
	e2 := testkit.NewEngine(t, actors.Config{Concurrency: 1})
	_, events2 := testkit.RunCouncil(t, e2, messages.StartRun{Question: "q", Scenario: &sc})
	added2 := payloads[*messages.CitationAddedPayload](events2)
	sameSource := func(a, b *messages.CitationAddedPayload) bool {
		x, y := a.Citation, b.Citation
		x.FirstSeenAt, y.FirstSeenAt = time.Time{}, time.Time{} // the runs' clocks differ
		return x == y
	}
	if !slices.EqualFunc(added, added2, sameSource) {
		t.Error("citation numbering depends on scheduling")
	}
}

func TestCouncil_CostEstimateAndTotals(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 5, Waves: 2, Teams: 1, TeamSize: 2, Tokens: 4, Debate: &messages.DebateScenario{Agents: 2, Rounds: 2, Judge: true}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	est := payloads[*messages.RunCostEstimatePayload](events)
	// 3 leaves + team (2 members + synthesis) + debate (2×2 turns + 2 judges + synthesis).
	if len(est) != 1 || est[0].NodeCount != 3+3+7 || est[0].EstTokens != int64(est[0].NodeCount)*2000 || est[0].EstWallSeconds != est[0].EstTokens/50 {
		t.Errorf("run_cost_estimate %+v", est)
	}
	var sum messages.Usage
	for _, p := range payloads[*messages.TokenUsagePayload](events) {
		sum = sum.Add(p.Usage)
	}
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Usage != sum || sum.OutputTokens == 0 {
		t.Errorf("run_finished usage %+v, token_usage total %+v", fin.Usage, sum)
	}
}

// plannedModel is the scripted model with the director's plan replaced.
type plannedModel struct {
	*scripted.Model
	plan string
}

func (m plannedModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role == model.RoleDirector {
		return &textStream{chunks: []string{m.plan}}, nil
	}
	return m.Model.Stream(ctx, req)
}

type textStream struct {
	chunks []string
	done   bool
}

func (s *textStream) Recv() (model.Chunk, error) {
	if len(s.chunks) > 0 {
		c := &model.Text{Text: s.chunks[0]}
		s.chunks = s.chunks[1:]
		return c, nil
	}
	if !s.done {
		s.done = true
		return &model.Usage{Model: "plan", Usage: messages.Usage{OutputTokens: 1}}, nil
	}
	return nil, io.EOF
}

func (s *textStream) Close() error { return nil }

// TestCouncil_RandomPlansHoldEveryInvariant: random valid plans with team
// and debate nodes (seeded), run end to end, always satisfy every
// invariant and complete every node.
func TestCouncil_RandomPlansHoldEveryInvariant(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 7))
			plan := dag.RandomPlan(r, dag.GenOptions{Nodes: 3 + r.IntN(6), Waves: 1 + r.IntN(3), TeamProb: 0.3, DebateProb: 0.2, MaxDepth: 2})
			if err := dag.Validate(plan); err != nil {
				t.Fatalf("generated plan invalid: %v", err)
			}
			js, _ := json.Marshal(plan)
			sm, err := scripted.New(messages.Scenario{Tokens: 3, Seed: int64(seed)})
			if err != nil {
				t.Fatal(err)
			}
			e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return plannedModel{sm, string(js)}, nil }})
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q"})
			testkit.AssertInvariants(t, events)
			fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			if fin.Nodes.Completed != len(plan.Nodes) {
				t.Errorf("completed %+v of %d nodes", fin.Nodes, len(plan.Nodes))
			}
		})
	}
}

// failingModel is the scripted model, except that agent fail's turns fail.
type failingModel struct {
	*scripted.Model
	fail string
}

func (m failingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.AgentID == m.fail {
		return nil, fmt.Errorf("%w: %s broke", model.ErrModel, m.fail)
	}
	return m.Model.Stream(ctx, req)
}

// TestCouncil_FailedTeamMemberFailsTheRun: a node failing inside a team
// fails the team node (its siblings cancelled or skipped), the team's
// downstream nodes are skipped, and the run ends with one run_error.
func TestCouncil_FailedTeamMemberFailsTheRun(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 4, Waves: 2, FanIn: 2, Teams: 1, TeamSize: 4, Tokens: 4}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return failingModel{sm, "n001/m1"}, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	runErr := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if runErr.Code != messages.ErrCodeNodeFailed || !strings.Contains(runErr.Message, "n001/m1") {
		t.Errorf("run_error %+v", runErr)
	}
	if testkit.Count(events, messages.RunError) != 1 || testkit.Count(events, messages.TeamSynthesized) != 0 {
		t.Error("want exactly one run_error and no team synthesis")
	}
	team := without(laneTypes(events, "node:n001"), messages.WaveStarted, messages.WaveCompleted)
	if team[len(team)-1] != messages.NodeFailed {
		t.Errorf("team lane ends with %v", team)
	}
	skipped := map[string]bool{}
	for _, p := range payloads[*messages.NodeSkippedPayload](events) {
		skipped[p.NodeID] = true
	}
	for _, p := range payloads[*messages.NodeStartedPayload](events) {
		if slices.Contains(p.Deps, "n001") {
			t.Errorf("%s started although it depends on the failed team", p.NodeID)
		}
	}
	for _, id := range dag.Waves(sm.Plan())[1] {
		if !skipped[id] {
			t.Errorf("wave-1 node %s not skipped (skipped: %v)", id, skipped)
		}
	}
}

// blockingSubagents is the scripted model whose sub-agents work until cancelled.
type blockingSubagents struct{ *scripted.Model }

func (m blockingSubagents) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role == model.RoleSubagent {
		return &blockedStream{ctx: ctx}, nil
	}
	return m.Model.Stream(ctx, req)
}

type blockedStream struct{ ctx context.Context }

func (s *blockedStream) Recv() (model.Chunk, error) { <-s.ctx.Done(); return nil, s.ctx.Err() }
func (s *blockedStream) Close() error               { return nil }

// TestCouncil_AdvisorConsult: in consult mode each worker's
// consult_advisor calls are answered by the advisor (the advice is the
// tool result, the advisor turn's usage reported on the worker's lane) up
// to max_consults; the call beyond is an error result saying the budget
// is spent. No gate runs: no advisor event. Outside consult mode the tool
// answers with an error.
func TestCouncil_AdvisorConsult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    *messages.AdvisorOptions
		advised int // consults answered per node
		refused int // error results per node
		why     string
	}{
		{"within the budget", &messages.AdvisorOptions{Mode: messages.AdvisorModeConsult, MaxConsults: 3}, 3, 0, ""},
		{"beyond the budget", &messages.AdvisorOptions{Mode: messages.AdvisorModeConsult, MaxConsults: 1}, 1, 2, "used its 1 consults"},
		{"gate mode", &messages.AdvisorOptions{}, 0, 3, "no advisor in consult mode"},
		{"no advisor", nil, 0, 3, "no advisor in consult mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{})
			sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, Advisor: &messages.AdvisorScenario{Consults: 3}}
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Advisor: tc.opts})
			testkit.AssertInvariants(t, events)
			terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			for _, node := range []string{"node:n001", "node:n002"} {
				advised, refused, usage := 0, 0, 0
				for _, env := range events {
					if env.Lane.StreamID != messages.StreamID(node) {
						continue
					}
					switch p := env.Payload.(type) {
					case *messages.ToolCallFinishedPayload:
						switch {
						case p.Tool != "consult_advisor":
						case !p.IsError && strings.HasPrefix(p.Result, "Advice for "):
							advised++
						case p.IsError && strings.Contains(p.Result, tc.why):
							refused++
						default:
							t.Errorf("%s: result %+v", node, p)
						}
					case *messages.TokenUsagePayload:
						if p.Role == "advisor" {
							usage++
						}
					case *messages.AdvisorPayload:
						if tc.opts == nil || tc.opts.Mode == messages.AdvisorModeConsult {
							t.Errorf("%s: an advisor gate event in consult mode: %+v", node, p)
						}
					}
				}
				if advised != tc.advised || refused != tc.refused || usage < tc.advised {
					t.Errorf("%s: %d advised, %d refused, %d advisor turns; want %d, %d", node, advised, refused, usage, tc.advised, tc.refused)
				}
			}
		})
	}
}

// TestCouncil_FailingAgentStopsItsSubagentsFirst: an agent that fails
// (here halted by the advisor) while an async task still works closes the
// task's lane before its own.
func TestCouncil_FailingAgentStopsItsSubagentsFirst(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 4, Delegations: &messages.DelegationScenario{Async: 1},
		Advisor: &messages.AdvisorScenario{Halt: messages.NodeSelector{IDs: []string{"n001"}}}}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return blockingSubagents{sm}, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Advisor: &messages.AdvisorOptions{}})
	testkit.AssertInvariants(t, events)
	if got := terminal[*messages.RunErrorPayload](t, events, ref.RunID); got.Code != messages.ErrCodeAdvisorHalt {
		t.Fatalf("run_error %+v", got)
	}
	fins := payloads[*messages.SubagentFinishedPayload](events)
	if len(fins) != 1 || fins[0].Outcome != messages.OutcomeCancelled || fins[0].Error != "its parent failed" {
		t.Errorf("sub-agent ends %+v", fins)
	}
}

// TestCouncil_NestedDebatePanic: a debate inside a team whose agent panics
// is never restarted in place (its closed lanes would be reopened): the
// round runs again, all for one, on the lanes of its next attempt; an agent
// that keeps panicking exhausts the restart limit, and the debate node
// fails, then the team, then the run.
func TestCouncil_NestedDebatePanic(t *testing.T) {
	t.Parallel()
	plan := messages.Plan{Nodes: []messages.PlanNode{
		{ID: "n001", Goal: "team", Kind: messages.KindTeam, Team: &messages.Plan{Nodes: []messages.PlanNode{
			{ID: "d", Goal: "argue", Kind: messages.KindDebate, Debate: &messages.DebateConfig{Agents: []messages.DebateAgent{{ID: "a1"}, {ID: "a2"}}, Rounds: 2}},
			{ID: "x", Goal: "leaf"},
		}}},
		{ID: "n002", Goal: "after", Deps: []string{"n001"}},
	}}
	js, _ := json.Marshal(plan)
	sm, err := scripted.New(messages.Scenario{Tokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		times   int64 // how many turns of n001/d:a2 panic
		fails   bool
		restart int
	}{
		{"once: the round runs again", 1, false, 1},
		{"always: the debate fails at the restart limit", 1 << 30, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := panicTimes{Model: plannedModel{sm, string(js)}, agent: "n001/d:a2", left: new(atomic.Int64)}
			m.left.Store(tc.times)
			e := testkit.NewEngine(t, actors.Config{RestartBackoff: -1, Models: func(messages.Scenario) (model.Model, error) { return m, nil }})
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q"})
			testkit.AssertInvariants(t, events)
			if n := testkit.Count(events, messages.AgentRestarted); n != 0 {
				t.Errorf("%d agent_restarted: the debate was restarted in place", n)
			}
			if n := testkit.Count(events, messages.DebateRoundRestarted); n != tc.restart {
				t.Errorf("%d debate_round_restarted, want %d", n, tc.restart)
			}
			if !tc.fails {
				terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
				return
			}
			terminal[*messages.RunErrorPayload](t, events, ref.RunID)
			failed := map[string]bool{}
			for _, p := range payloads[*messages.NodeFailedPayload](events) {
				failed[p.NodeID] = true
			}
			if !failed["n001/d"] || !failed["n001"] {
				t.Errorf("failed nodes %v, want n001/d and n001", failed)
			}
		})
	}
}

// panicTimes panics the first left turns of one agent.
type panicTimes struct {
	model.Model
	agent string
	left  *atomic.Int64
}

func (m panicTimes) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.AgentID == m.agent && m.left.Add(-1) >= 0 {
		panic("boom in " + m.agent)
	}
	return m.Model.Stream(ctx, req)
}

// TestCouncil_TerminalIdentity: the terminal event names the request that
// started the run, its tenant and its conversation (the session), also
// when the run ends with an error.
func TestCouncil_TerminalIdentity(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	for _, sc := range []messages.Scenario{{Nodes: 1, Tokens: 2}, {Nodes: 1, Tokens: 2, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}}} {
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, SessionID: "conv-1", RequestID: "req-1"})
		var id messages.RunIdentity
		switch p := testkit.Terminal(events, ref.RunID).Payload.(type) {
		case *messages.RunFinishedPayload:
			id = p.RunIdentity
		case *messages.RunErrorPayload:
			id = p.RunIdentity
		}
		if id != (messages.RunIdentity{RequestID: "req-1", TenantID: messages.LocalTenant, ConversationID: "conv-1"}) {
			t.Errorf("terminal identity %+v", id)
		}
	}
}

// TestCouncil_ToolDisplayFields: tool events carry a display name, an
// arguments summary and the call's duration.
func TestCouncil_ToolDisplayFields(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, ToolsPerNode: 2}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	started, finished := payloads[*messages.ToolCallStartedPayload](events), payloads[*messages.ToolCallFinishedPayload](events)
	if len(started) != 4 || len(finished) != 4 {
		t.Fatalf("%d tool_call_started, %d tool_call_finished", len(started), len(finished))
	}
	for _, p := range started {
		if p.DisplayName != "Search" || !strings.HasPrefix(p.ArgsSummary, "query=") {
			t.Errorf("tool_call_started %+v", p)
		}
	}
	for _, p := range finished {
		if p.DisplayName != "Search" || p.DurationMS < 0 || p.DurationDisplay != messages.DurationDisplay(time.Duration(p.DurationMS)*time.Millisecond) {
			t.Errorf("tool_call_finished %+v", p)
		}
	}
}

// TestCouncil_ProgressEvents: with prefill_progress, each worker and
// synthesiser turn reports reading its prompt before its first token; a
// team whose answer is compacted says so before team_synthesized.
func TestCouncil_ProgressEvents(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 3, Waves: 2, Teams: 1, TeamSize: 2, Tokens: 4, SynthesisTokens: 600, PrefillProgress: 3}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	perLane := map[messages.StreamID][]*messages.Envelope{}
	for _, env := range events {
		perLane[env.Lane.StreamID] = append(perLane[env.Lane.StreamID], env)
	}
	nodes, synths := 0, 0
	for lane, evs := range perLane {
		var got []messages.PromptProgress
		for _, env := range evs {
			switch p := env.Payload.(type) {
			case *messages.NodeProgressPayload:
				got = append(got, p.PromptProgress)
				nodes++
			case *messages.SynthesisProgressPayload:
				got = append(got, p.PromptProgress)
				synths++
			case *messages.TextDeltaPayload:
				if len(got) == 0 && (strings.HasPrefix(string(lane), "node:") || strings.HasPrefix(string(lane), "synthesis")) && !strings.Contains(string(lane), "/sub:") {
					t.Errorf("lane %s: text before any progress", lane)
				}
			}
		}
		for i, p := range got {
			if p.Total <= 0 || p.Processed > p.Total || i > 0 && p.Processed < got[i-1].Processed {
				t.Errorf("lane %s: progress %+v", lane, got)
				break
			}
		}
	}
	// 4 workers (2 plan nodes, 2 team members) and 2 synthesisers (the run's, the team's), 3 reports each.
	if nodes != 4*3 || synths != 2*3 {
		t.Errorf("%d node_progress, %d synthesis_progress; want 12 and 6", nodes, synths)
	}
	var teamLane []messages.EventType
	for _, env := range events {
		if p, ok := env.Payload.(*messages.TeamSynthesizedPayload); ok && !p.Compacted {
			t.Fatalf("team_synthesized %+v: the 600-word answer is not compacted", p)
		}
		if env.Lane.StreamID == messages.NodeStream("n001") || env.Type == messages.NodeCompacting {
			teamLane = append(teamLane, env.Type)
		}
	}
	i := slices.Index(teamLane, messages.NodeCompacting)
	if i < 0 || i+1 >= len(teamLane) || teamLane[i+1] != messages.TeamSynthesized {
		t.Errorf("team lane %v: want node_compacting right before team_synthesized", teamLane)
	}
}

// TestCouncil_DebateRoundRestartsAllForOne: a debater whose turn panics in
// round 2 takes its round down with it: the round's agents share its
// transcript, so the round starts again from its first speaker (all for
// one), on the lanes of its second attempt, and the debate goes on.
func TestCouncil_DebateRoundRestartsAllForOne(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 6, Debate: &messages.DebateScenario{Agents: 3, Rounds: 2, Judge: true, PanicRound: 2}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	restarted := payloads[*messages.DebateRoundRestartedPayload](events)
	if len(restarted) != 1 || restarted[0].Round != 2 || restarted[0].Attempt != 2 || !strings.Contains(restarted[0].Reason, "panic") {
		t.Fatalf("debate_round_restarted %+v", restarted)
	}
	var turns []string // round 2's turns, in order: agent, attempt, how it ended
	for _, p := range payloads[*messages.DebateTurnCompletedPayload](events) {
		if p.Round == 2 {
			turns = append(turns, fmt.Sprintf("%s@%d restarted=%v", p.AgentID, max(p.Attempt, 1), p.Restarted))
		}
	}
	want := []string{"a1@1 restarted=false", "a2@1 restarted=false", "a3@1 restarted=true",
		"a1@2 restarted=false", "a2@2 restarted=false", "a3@2 restarted=false"}
	if !slices.Equal(turns, want) {
		t.Fatalf("round 2's turns %v, want %v", turns, want)
	}
	for _, a := range []string{"a1", "a2", "a3"} {
		if types := laneTypes(events, messages.DebateTurnStreamAt("n001", 2, 2, a)); len(types) == 0 || types[0] != messages.DebateTurnStarted {
			t.Errorf("no second run of %s's turn: %v", a, types)
		}
	}
	if judged := laneTypes(events, messages.JudgeStreamAt("n001", 2, 2)); len(judged) == 0 {
		t.Error("the judge did not hear round 2's second run")
	}
}

// TestCouncil_DebateTools: a debate whose config gives its debaters tools
// runs every debater's turn as an agent on the turn lane: each turn calls
// search (tool_call_started and tool_call_finished on that lane, between
// debate_turn_started and debate_turn_completed) and then argues, with a
// stance. Under hitl tools each call first waits for a tool_approval
// raised on the debater's lane.
func TestCouncil_DebateTools(t *testing.T) {
	t.Parallel()
	for _, hitl := range []messages.HITLMode{messages.HITLNone, messages.HITLTools} {
		t.Run(string(hitl), func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{})
			sc := messages.Scenario{Nodes: 1, Tokens: 4, Debate: &messages.DebateScenario{Agents: 2, Rounds: 2, Tools: []string{"search"}}}
			ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: hitl, Scenario: &sc},
				func(p *messages.InterruptRaisedPayload) messages.Resume {
					return messages.Resume{Decision: messages.DecisionApprove}
				})
			testkit.AssertInvariants(t, events)
			terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			turns := 0
			for _, env := range events {
				p, ok := env.Payload.(*messages.DebateTurnCompletedPayload)
				if !ok {
					continue
				}
				turns++
				lane := env.Lane.StreamID
				got := without(laneTypes(events, lane), streamed...)
				want := []messages.EventType{messages.DebateTurnStarted, messages.ToolCallStarted, messages.ToolCallFinished, messages.DebateTurnCompleted}
				if hitl == messages.HITLTools {
					want = []messages.EventType{messages.DebateTurnStarted, messages.ToolCallStarted, messages.InterruptRaised, messages.InterruptResolved,
						messages.ToolCallFinished, messages.DebateTurnCompleted}
				}
				if !slices.Equal(got, want) {
					t.Errorf("lane %s: %v, want %v", lane, got, want)
				}
				if p.Stance == "" || p.Text == "" {
					t.Errorf("turn %+v without a stance or text", p)
				}
			}
			if turns != 4 {
				t.Fatalf("%d debate turns, want 4", turns)
			}
			for _, env := range events {
				if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && (p.IsError || p.Tool != "search" || !strings.HasPrefix(string(env.Lane.StreamID), "debate:")) {
					t.Errorf("tool result %+v on %s", p, env.Lane.StreamID)
				}
			}
		})
	}
}
