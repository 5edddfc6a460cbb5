package a2a_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// script builds the envelopes of run r1 in session s1, numbering them.
type script struct {
	seq uint64
	t0  time.Time
}

var (
	runLane      = messages.RunLane()
	directorLane = runLane.Child(messages.DirectorStream)
	synthLane    = runLane.Child(messages.SynthesisStream)
)

func nodeLane(id string) messages.Lane { return runLane.Child(messages.NodeStream(id)) }

func subLane(node, sub string) messages.Lane {
	return nodeLane(node).Child(messages.SubagentStream(messages.NodeStream(node), sub))
}

func (s *script) ev(lane messages.Lane, agent string, p messages.Payload) *messages.Envelope {
	s.seq++
	return &messages.Envelope{
		ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d", s.seq)), Seq: s.seq, Type: p.EventType(),
		Timestamp: s.t0.Add(time.Duration(s.seq) * time.Millisecond), SessionID: "s1", RunID: "r1",
		AgentID: agent, Lane: lane, Payload: p,
	}
}

func (s *script) run(p messages.Payload) *messages.Envelope { return s.ev(runLane, "supervisor", p) }

func (s *script) node(id string, p messages.Payload) *messages.Envelope {
	return s.ev(nodeLane(id), id, p)
}

func newScript() *script { return &script{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func summary() messages.RunSummary {
	return messages.RunSummary{RunID: "r1", SessionID: "s1", Question: "why?", Status: messages.StatusPlanning,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// describe renders a frame compactly for tables:
//
//	status WORKING "text of the first part"
//	artifact <id> new|append "text" [last]
//	task STATE
func describe(f a2a.StreamResponse) string {
	switch {
	case f.Task != nil:
		return "task " + strings.TrimPrefix(string(f.Task.Status.State), "TASK_STATE_")
	case f.StatusUpdate != nil:
		s := "status " + strings.TrimPrefix(string(f.StatusUpdate.Status.State), "TASK_STATE_")
		if m := f.StatusUpdate.Status.Message; m != nil && len(m.Parts) > 0 && m.Parts[0].Text != nil {
			s += fmt.Sprintf(" %q", *m.Parts[0].Text)
		}
		return s
	case f.ArtifactUpdate != nil:
		u := f.ArtifactUpdate
		mode := "new"
		if u.Append {
			mode = "append"
		}
		text := ""
		for _, p := range u.Artifact.Parts {
			text += *p.Text
		}
		s := fmt.Sprintf("artifact %s %s %q", u.Artifact.ArtifactID, mode, text)
		if u.LastChunk {
			s += " last"
		}
		return s
	}
	return "message"
}

func describeAll(fs []a2a.StreamResponse) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, describe(f))
	}
	return out
}

// applyAll applies events and returns every frame.
func applyAll(p *a2a.Projector, evs ...*messages.Envelope) []a2a.StreamResponse {
	var out []a2a.StreamResponse
	for _, e := range evs {
		out = append(out, p.Apply(e)...)
	}
	return out
}

func started(s *script) []*messages.Envelope {
	return []*messages.Envelope{
		s.run(&messages.RunStartedPayload{Question: "why?", HITL: messages.HITLNone}),
		s.node("n001", &messages.NodeStartedPayload{NodeID: "n001", Goal: "goal one"}),
	}
}

// TestProjector_Mapping: every event type, applied after a prefix that
// puts the run where the event can happen, projects to the documented
// frames.
func TestProjector_Mapping(t *testing.T) {
	t.Parallel()
	toolArgs := json.RawMessage(`{"query":"q"}`)
	rows := []struct {
		name  string
		setup func(s *script) []*messages.Envelope
		event func(s *script) *messages.Envelope
		want  []string
		state a2a.TaskState
	}{
		{"run_started", nil,
			func(s *script) *messages.Envelope { return s.run(&messages.RunStartedPayload{Question: "why?"}) },
			[]string{`status WORKING "Council started: why?"`}, a2a.StateWorking},
		{"planning_started", started,
			func(s *script) *messages.Envelope {
				return s.ev(directorLane, "director", &messages.PlanningStartedPayload{Question: "why?"})
			},
			[]string{`status WORKING "Planning the council"`}, a2a.StateWorking},
		{"plan_proposed", started,
			func(s *script) *messages.Envelope {
				return s.ev(directorLane, "director", &messages.PlanProposedPayload{
					Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "n001"}, {ID: "n002"}}}, Waves: [][]string{{"n001"}, {"n002"}}})
			},
			[]string{`status WORKING "Plan proposed: 2 nodes in 2 waves"`}, a2a.StateWorking},
		{"planning_failed", started,
			func(s *script) *messages.Envelope {
				return s.ev(directorLane, "director", &messages.PlanningFailedPayload{Error: "cycle"})
			},
			[]string{`status WORKING "Planning failed: cycle"`}, a2a.StateWorking},
		{"run_rewound", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunRewoundPayload{From: "r0", Wave: 1, Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}, {ID: "y", Deps: []string{"x"}}}},
					Waves: [][]string{{"x"}, {"y"}}, Reused: []messages.ReusedNode{{NodeID: "x", Output: "done"}}})
			},
			[]string{`status WORKING "Rewound from run r0: wave 2 runs again, 1 node outputs reused"`}, a2a.StateWorking},
		{"plan_approved automatic", started,
			func(s *script) *messages.Envelope { return s.run(&messages.PlanApprovedPayload{Automatic: true}) },
			[]string{`status WORKING "Plan approved automatically"`}, a2a.StateWorking},
		{"plan_approved edited", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.PlanApprovedPayload{Edited: true, Plan: &messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}}}, Waves: [][]string{{"x"}}})
			},
			[]string{`status WORKING "Edited plan approved: 1 nodes in 1 waves"`}, a2a.StateWorking},
		{"plan_rejected", started,
			func(s *script) *messages.Envelope { return s.run(&messages.PlanRejectedPayload{Reason: "too big"}) },
			[]string{`status WORKING "Plan rejected: too big"`}, a2a.StateWorking},
		{"replan_attempt", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.ReplanAttemptPayload{Attempt: 1, MaxAttempts: 2, Reason: "too big"})
			},
			[]string{`status WORKING "Re-planning (attempt 1 of 2)"`}, a2a.StateWorking},
		{"wave_started", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"n001", "n002"}})
			},
			[]string{`status WORKING "Wave 1 started: n001, n002"`}, a2a.StateWorking},
		{"wave_completed", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.WaveCompletedPayload{Wave: 1, Completed: 2, Failed: 1})
			},
			[]string{`status WORKING "Wave 2 done: 2 completed, 1 failed, 0 cancelled, 0 skipped"`}, a2a.StateWorking},
		{"node_started", func(s *script) []*messages.Envelope { return started(s)[:1] },
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeStartedPayload{NodeID: "n001", Goal: "goal one"})
			},
			[]string{`status WORKING "n001 started: goal one"`}, a2a.StateWorking},
		{"text_delta first", started,
			func(s *script) *messages.Envelope { return s.node("n001", &messages.TextDeltaPayload{Delta: "Hel"}) },
			[]string{`artifact node:n001 new "Hel"`}, a2a.StateWorking},
		{"text_delta next",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.TextDeltaPayload{Delta: "Hel"}))
			},
			func(s *script) *messages.Envelope { return s.node("n001", &messages.TextDeltaPayload{Delta: "lo"}) },
			[]string{`artifact node:n001 append "lo"`}, a2a.StateWorking},
		{"text_delta director", started,
			func(s *script) *messages.Envelope {
				return s.ev(directorLane, "director", &messages.TextDeltaPayload{Delta: `{"nodes":`})
			},
			[]string{}, a2a.StateWorking},
		{"text_delta synthesis", started,
			func(s *script) *messages.Envelope {
				return s.ev(synthLane, "synthesizer", &messages.TextDeltaPayload{Delta: "The"})
			},
			[]string{`artifact answer new "The"`}, a2a.StateWorking},
		{"reasoning_delta", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.ReasoningDeltaPayload{Delta: "hmm"})
			},
			[]string{}, a2a.StateWorking},
		{"node_progress", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeProgressPayload{NodeID: "n001", PromptProgress: messages.PromptProgress{Processed: 5, Total: 10}})
			},
			[]string{}, a2a.StateWorking},
		{"synthesis_progress", started,
			func(s *script) *messages.Envelope {
				return s.ev(messages.RunLane().Child(messages.SynthesisStream), "synthesizer", &messages.SynthesisProgressPayload{})
			},
			[]string{}, a2a.StateWorking},
		{"node_compacting", started,
			func(s *script) *messages.Envelope { return s.node("t", &messages.NodeCompactingPayload{NodeID: "t"}) },
			[]string{`status WORKING "t: compacting its output"`}, a2a.StateWorking},
		{"file", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.FilePayload{Path: "notes/a.md", Size: 12, Encoding: messages.FileEncodingUTF8, Content: "hello, world", CallID: "c1", Tool: "workspace.write"})
			},
			[]string{`status WORKING "n001 wrote notes/a.md (12 bytes)"`}, a2a.StateWorking},
		{"token_usage", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.TokenUsagePayload{Model: "m", Turn: 1})
			},
			[]string{}, a2a.StateWorking},
		{"tool_call_started", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search", Args: toolArgs})
			},
			[]string{`status WORKING "n001 called search"`}, a2a.StateWorking},
		{"tool_call_progress", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", messages.NewToolCallProgress("c1", "search", 40, 100, "page 40"))
			},
			[]string{`status WORKING "n001: search 40/100 page 40"`}, a2a.StateWorking},
		{"tool_call_progress without total", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", messages.NewToolCallProgress("c1", "search", 2.5, 0, ""))
			},
			[]string{`status WORKING "n001: search 2.5"`}, a2a.StateWorking},
		{"turn_started", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.TurnStartedPayload{Model: "m", Turn: 1, Attempt: 1})
			},
			[]string{}, a2a.StateWorking},
		{"request_received", started,
			func(s *script) *messages.Envelope { return s.run(messages.NewRequestReceived("acme", "why?")) },
			[]string{}, a2a.StateWorking},
		{"tool_call_finished", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "ok"})
			},
			[]string{`status WORKING "n001: search returned"`}, a2a.StateWorking},
		{"tool_call_finished error", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "denied", IsError: true})
			},
			[]string{`status WORKING "n001: search failed: denied"`}, a2a.StateWorking},
		{"agent_restarted with output",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.TextDeltaPayload{Delta: "partial"}))
			},
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.AgentRestartedPayload{Attempt: 2, Reason: "panic"})
			},
			[]string{`artifact node:n001 new ""`, `status WORKING "n001 restarted (attempt 2): panic"`}, a2a.StateWorking},
		{"replay_truncated", started,
			func(s *script) *messages.Envelope {
				return s.ev(messages.Lane{StreamID: messages.SessionStream}, "", &messages.ReplayTruncatedPayload{After: 3, FirstRetained: 10})
			},
			[]string{}, a2a.StateWorking},
		{"run_abort_requested", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunAbortRequestedPayload{Reason: "stop"})
			},
			[]string{`status WORKING "Cancel accepted: stop"`}, a2a.StateWorking},
		{"run_cost_estimate", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunCostEstimatePayload{NodeCount: 3, EstTokens: 6000, EstWallSeconds: 120})
			},
			[]string{`status WORKING "Estimated cost: 3 agents, about 6000 tokens, about 120 s"`}, a2a.StateWorking},
		{"team_started", started,
			func(s *script) *messages.Envelope {
				return s.node("t1", &messages.TeamStartedPayload{TeamID: "t1", Depth: 1, Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "t1/a"}}}, Waves: [][]string{{"t1/a"}}})
			},
			[]string{`status WORKING "Team t1 started: 1 nodes in 1 waves"`}, a2a.StateWorking},
		{"team_synthesized", started,
			func(s *script) *messages.Envelope {
				return s.node("t1", &messages.TeamSynthesizedPayload{TeamID: "t1", CompactedOutput: "x"})
			},
			[]string{`status WORKING "Team t1 synthesised its findings"`}, a2a.StateWorking},
		{"subteam_spawned", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.SubteamSpawnedPayload{ParentNodeID: "n001", TeamID: "n001.team", ChildGraphSummary: "2 nodes: a, b"})
			},
			[]string{`status WORKING "n001 spawned sub-team n001.team (2 nodes: a, b)"`}, a2a.StateWorking},
		{"steering_received", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.SteeringReceivedPayload{SteeringID: "s1", Note: "more on costs"})
			},
			[]string{`status WORKING "Steering received: more on costs"`}, a2a.StateWorking},
		{"steering_applied", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.SteeringAppliedPayload{SteeringID: "s1", AppliedAtWave: 1})
			},
			[]string{`status WORKING "Steering s1 applied at wave 2"`}, a2a.StateWorking},
		{"steering_rejected", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.SteeringRejectedPayload{SteeringID: "s1", Error: "node n001 has started"})
			},
			[]string{`status WORKING "Steering s1 rejected: node n001 has started"`}, a2a.StateWorking},
		{"debate_round_started", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateRoundStartedPayload{NodeID: "d1", Round: 2})
			},
			[]string{`status WORKING "Debate d1: round 2"`}, a2a.StateWorking},
		{"debate_turn_started", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateTurnStartedPayload{NodeID: "d1", AgentID: "a1", Round: 1})
			},
			[]string{}, a2a.StateWorking},
		{"debate_turn_completed", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateTurnCompletedPayload{NodeID: "d1", AgentID: "a1", Round: 1, Stance: messages.StanceHeld})
			},
			[]string{}, a2a.StateWorking},
		{"debate_judge_started", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateJudgeStartedPayload{NodeID: "d1", Round: 1})
			},
			[]string{}, a2a.StateWorking},
		{"debate_judge_summary", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateJudgeSummaryPayload{NodeID: "d1", Round: 1, Consensus: true})
			},
			[]string{`status WORKING "Debate d1: judge of round 1: consensus true"`}, a2a.StateWorking},
		{"debate_round_restarted", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateRoundRestartedPayload{NodeID: "d1", Round: 2, Attempt: 2, Reason: "panic"})
			},
			[]string{`status WORKING "Debate d1: round 2 starts again (attempt 2): panic"`}, a2a.StateWorking},
		{"debate_round_compacted", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateRoundCompactedPayload{NodeID: "d1", Round: 1, Summary: "x"})
			},
			[]string{}, a2a.StateWorking},
		{"debate_stance_map", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DebateStanceMapPayload{NodeID: "d1", Rounds: 2, Stances: []messages.AgentStance{{AgentID: "a1", Stance: messages.StanceHeld}, {AgentID: "a2", Stance: messages.StanceConceded}}})
			},
			[]string{`status WORKING "Debate d1 ended after 2 rounds: a1 held, a2 conceded"`}, a2a.StateWorking},
		{"dissent", started,
			func(s *script) *messages.Envelope {
				return s.node("d1", &messages.DissentPayload{DissentID: "d1/dissent/a2", ConflictID: "d1", DissentingAgentID: "a2", Position: "no"})
			},
			[]string{`status WORKING "Dissent of a2 in d1: no"`}, a2a.StateWorking},
		{"advisor", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.AdvisorPayload{Kind: messages.AdvisorRedirect, Detail: "cover costs"})
			},
			[]string{`status WORKING "Advisor on n001: gate_redirect: cover costs"`}, a2a.StateWorking},
		{"escalation", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.EscalationPayload{Reason: "contradicts the plan"})
			},
			[]string{`status WORKING "Escalation from n001: contradicts the plan"`}, a2a.StateWorking},
		{"citation_added", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.CitationAddedPayload{Citation: messages.Citation{Number: 1, URL: "https://example.org/a"}})
			},
			[]string{`status WORKING "Source [1]: https://example.org/a"`}, a2a.StateWorking},
		{"warning", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.WarningPayload{Code: "slow", Message: "taking long"})
			},
			[]string{`status WORKING "Warning from n001 (slow): taking long"`}, a2a.StateWorking},
		{"subagent_started", started,
			func(s *script) *messages.Envelope {
				return s.ev(subLane("n001", "sub1"), "n001.sub1", &messages.SubagentStartedPayload{SubagentID: "n001.sub1", Task: "dig"})
			},
			[]string{`status WORKING "n001.sub1 started: dig"`}, a2a.StateWorking},
		{"subagent text and finished ok",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.ev(subLane("n001", "sub1"), "n001.sub1", &messages.TextDeltaPayload{Delta: "dug"}))
			},
			func(s *script) *messages.Envelope {
				return s.ev(subLane("n001", "sub1"), "n001.sub1", &messages.SubagentFinishedPayload{SubagentID: "n001.sub1", Outcome: messages.OutcomeOK, Output: "dug"})
			},
			[]string{`artifact node:n001/sub:sub1 new "dug" last`}, a2a.StateWorking},
		{"subagent_finished failed",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.ev(subLane("n001", "sub1"), "n001.sub1", &messages.TextDeltaPayload{Delta: "du"}))
			},
			func(s *script) *messages.Envelope {
				return s.ev(subLane("n001", "sub1"), "n001.sub1", &messages.SubagentFinishedPayload{SubagentID: "n001.sub1", Outcome: messages.OutcomeFailed, Error: "boom"})
			},
			[]string{`artifact node:n001/sub:sub1 append "" last`, `status WORKING "n001.sub1 failed: boom"`}, a2a.StateWorking},
		{"node_completed replaces the streamed text",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.TextDeltaPayload{Delta: "draft"}))
			},
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeCompletedPayload{NodeID: "n001", Output: "final"})
			},
			[]string{`artifact node:n001 new "final" last`}, a2a.StateWorking},
		{"node_completed without text", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeCompletedPayload{NodeID: "n001", Output: "out"})
			},
			[]string{`artifact node:n001 new "out" last`}, a2a.StateWorking},
		{"node_failed without artifact", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeFailedPayload{NodeID: "n001", Error: "model error"})
			},
			[]string{`status WORKING "n001 failed: model error"`}, a2a.StateWorking},
		{"node_cancelled",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.TextDeltaPayload{Delta: "x"}))
			},
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.NodeCancelledPayload{NodeID: "n001", Reason: "run aborted"})
			},
			[]string{`artifact node:n001 append "" last`, `status WORKING "n001 cancelled: run aborted"`}, a2a.StateWorking},
		{"node_skipped", started,
			func(s *script) *messages.Envelope {
				return s.ev(nodeLane("n002"), "n002", &messages.NodeSkippedPayload{NodeID: "n002", Reason: "dependency failed", Dependency: "n001"})
			},
			[]string{`status WORKING "n002 skipped: dependency failed"`}, a2a.StateWorking},
		{"synthesis_started", started,
			func(s *script) *messages.Envelope {
				return s.ev(synthLane, "synthesizer", &messages.SynthesisStartedPayload{Inputs: 3})
			},
			[]string{`status WORKING "Synthesising the answer from 3 inputs"`}, a2a.StateWorking},
		{"synthesis_completed",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.ev(synthLane, "synthesizer", &messages.TextDeltaPayload{Delta: "A"}))
			},
			func(s *script) *messages.Envelope {
				return s.ev(synthLane, "synthesizer", &messages.SynthesisCompletedPayload{Answer: "A."})
			},
			[]string{`artifact answer new "A." last`}, a2a.StateWorking},
		{"synthesis_failed",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.ev(synthLane, "synthesizer", &messages.TextDeltaPayload{Delta: "A"}))
			},
			func(s *script) *messages.Envelope {
				return s.ev(synthLane, "synthesizer", &messages.SynthesisFailedPayload{Error: "model down"})
			},
			[]string{`artifact answer append "" last`, `status WORKING "Synthesis failed: model down"`}, a2a.StateWorking},
		{"interrupt_raised", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval,
					TimeoutSeconds: 60, ToolName: "search", ToolArgs: toolArgs, CallID: "c1"})
			},
			[]string{`status INPUT_REQUIRED "Input required"`}, a2a.StateInputRequired},
		{"interrupt_resolved",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptInfoRequest, Question: "which?"}))
			},
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptInfoRequest, Response: "that"})
			},
			[]string{`status WORKING "Input received, resuming"`}, a2a.StateWorking},
		{"interrupt_expired",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.node("n001", &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval}))
			},
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.InterruptExpiredPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Action: messages.DecisionReject})
			},
			[]string{`status WORKING "Nobody answered in time: reject taken, resuming"`}, a2a.StateWorking},
		{"approval_signature_added", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.ApprovalSignatureAddedPayload{InterruptID: "i1", Approver: "alice",
					Statement: messages.ApprovalStatement{Decision: messages.DecisionApprove}, Count: 1, Required: 2})
			},
			[]string{`status WORKING "alice signed approve of interrupt i1: 1 of 2 signatures"`}, a2a.StateWorking},
		{"remote_task", started,
			func(s *script) *messages.Envelope {
				return s.node("n001", &messages.RemoteTaskPayload{Agent: "helper", TaskID: "t1", ContextID: "c1", State: "TASK_STATE_WORKING", Message: "n001 started"})
			},
			[]string{`status WORKING "n001: remote agent helper, task t1: TASK_STATE_WORKING: n001 started"`}, a2a.StateWorking},
		{"run_finished after synthesis",
			func(s *script) []*messages.Envelope {
				return append(started(s), s.ev(synthLane, "synthesizer", &messages.SynthesisCompletedPayload{Answer: "42"}))
			},
			func(s *script) *messages.Envelope { return s.run(&messages.RunFinishedPayload{Answer: "42"}) },
			[]string{`status COMPLETED "42"`}, a2a.StateCompleted},
		{"run_finished without synthesis", started,
			func(s *script) *messages.Envelope { return s.run(&messages.RunFinishedPayload{Answer: "42"}) },
			[]string{`artifact answer new "42" last`, `status COMPLETED "42"`}, a2a.StateCompleted},
		{"run_error aborted", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "stop"})
			},
			[]string{`status CANCELED "aborted: stop"`}, a2a.StateCanceled},
		{"run_error plan_rejected", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunErrorPayload{Code: messages.ErrCodePlanRejected, Message: "no"})
			},
			[]string{`status REJECTED "plan_rejected: no"`}, a2a.StateRejected},
		{"run_error node_failed", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed, Message: "n001 failed"})
			},
			[]string{`status FAILED "node_failed: n001 failed"`}, a2a.StateFailed},
		{"run_error interrupted", started,
			func(s *script) *messages.Envelope {
				return s.run(&messages.RunErrorPayload{Code: messages.ErrCodeInterrupted, Message: "server shutting down"})
			},
			[]string{`status FAILED "interrupted: server shutting down"`}, a2a.StateFailed},
	}
	covered := map[messages.EventType]bool{}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s := newScript()
			p := a2a.NewProjector(summary())
			if row.setup != nil {
				applyAll(p, row.setup(s)...)
			}
			ev := row.event(s)
			got := describeAll(p.Apply(ev))
			if !reflect.DeepEqual(got, row.want) {
				t.Errorf("frames:\n got %q\nwant %q", got, row.want)
			}
			if p.State() != row.state {
				t.Errorf("state %s, want %s", p.State(), row.state)
			}
		})
		covered[row.event(newScript()).Type] = true
	}
	for _, typ := range messages.EventTypes() {
		if !covered[typ] {
			t.Errorf("event type %s has no mapping row", typ)
		}
	}
}

// TestProjector_FrameShape: ids, metadata and timestamps of frames.
func TestProjector_FrameShape(t *testing.T) {
	t.Parallel()
	s := newScript()
	p := a2a.NewProjector(summary())
	if task := p.Task(); task.Status.State != a2a.StateSubmitted || task.Status.Timestamp != "2026-01-02T03:04:05.000Z" {
		t.Fatalf("initial task %+v", task.Status)
	}
	frames := applyAll(p, started(s)...)
	su := frames[1].StatusUpdate
	if su == nil || su.TaskID != "r1" || su.ContextID != "s1" {
		t.Fatalf("status frame %+v", frames[1])
	}
	m := su.Status.Message
	if m.Role != a2a.RoleAgent || m.TaskID != "r1" || m.ContextID != "s1" || m.MessageID == "" {
		t.Fatalf("message %+v", m)
	}
	if got, want := string(m.Metadata), `{"conclave":{"seq":2,"event":"node_started","lane":"node:n001","agentId":"n001"}}`; got != want {
		t.Fatalf("metadata %s, want %s", got, want)
	}
	if su.Status.Timestamp != "2026-01-02T03:04:05.002Z" {
		t.Fatalf("timestamp %q", su.Status.Timestamp)
	}
	au := p.Apply(s.node("n001", &messages.TextDeltaPayload{Delta: "x"}))[0].ArtifactUpdate
	if au.Artifact.Name != "n001" || au.Artifact.Description != "goal one" || string(au.Metadata) != `{"conclave":{"seq":3,"event":"text_delta","lane":"node:n001","agentId":"n001"}}` {
		t.Fatalf("artifact frame %+v %s", au.Artifact, au.Metadata)
	}
	b, err := json.Marshal(au)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"append"`) || strings.Contains(string(b), `"lastChunk"`) {
		t.Fatalf("false flags must be omitted: %s", b)
	}
}

// TestProjector_NodeFailsMidStream: a node fails halfway through its
// output while a sibling streams; the sibling is cancelled, a dependent is
// skipped, and the run fails. Every artifact ends closed.
func TestProjector_NodeFailsMidStream(t *testing.T) {
	t.Parallel()
	s := newScript()
	p := a2a.NewProjector(summary())
	evs := []*messages.Envelope{
		s.run(&messages.RunStartedPayload{Question: "why?"}),
		s.run(&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"n001", "n002"}}),
		s.node("n001", &messages.NodeStartedPayload{NodeID: "n001", Goal: "a"}),
		s.node("n002", &messages.NodeStartedPayload{NodeID: "n002", Goal: "b"}),
		s.node("n001", &messages.TextDeltaPayload{Delta: "one "}),
		s.node("n002", &messages.TextDeltaPayload{Delta: "two "}),
		s.node("n001", &messages.TextDeltaPayload{Delta: "more"}),
		s.node("n002", &messages.NodeFailedPayload{NodeID: "n002", Error: "model error"}),
		s.node("n001", &messages.NodeCancelledPayload{NodeID: "n001", Reason: "a sibling failed"}),
		s.run(&messages.WaveCompletedPayload{Wave: 0, Failed: 1, Cancelled: 1}),
		s.ev(nodeLane("n003"), "n003", &messages.NodeSkippedPayload{NodeID: "n003", Reason: "dependency failed", Dependency: "n002"}),
		s.run(&messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed, Message: "node n002 failed"}),
		s.node("n001", &messages.TextDeltaPayload{Delta: "late"}), // after the terminal event: ignored
	}
	got := describeAll(applyAll(p, evs...))
	want := []string{
		`status WORKING "Council started: why?"`,
		`status WORKING "Wave 1 started: n001, n002"`,
		`status WORKING "n001 started: a"`,
		`status WORKING "n002 started: b"`,
		`artifact node:n001 new "one "`,
		`artifact node:n002 new "two "`,
		`artifact node:n001 append "more"`,
		`artifact node:n002 append "" last`,
		`status WORKING "n002 failed: model error"`,
		`artifact node:n001 append "" last`,
		`status WORKING "n001 cancelled: a sibling failed"`,
		`status WORKING "Wave 1 done: 0 completed, 1 failed, 1 cancelled, 0 skipped"`,
		`status WORKING "n003 skipped: dependency failed"`,
		`status FAILED "node_failed: node n002 failed"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames:\n got %q\nwant %q", got, want)
	}
	if !p.Final() || p.State() != a2a.StateFailed {
		t.Fatalf("state %s", p.State())
	}
	task := p.Task()
	if len(task.Artifacts) != 2 || *task.Artifacts[0].Parts[0].Text != "one more" || *task.Artifacts[1].Parts[0].Text != "two " {
		t.Fatalf("artifacts %+v", task.Artifacts)
	}
}

// TestProjector_Interrupts: two interrupts open at once; progress of other
// lanes is not reported while input is required; answering one restates
// the other; answering both resumes.
func TestProjector_Interrupts(t *testing.T) {
	t.Parallel()
	s := newScript()
	p := a2a.NewProjector(summary())
	applyAll(p, started(s)...)
	s.node("n001", &messages.TextDeltaPayload{}) // burn a seq
	frames := p.Apply(s.node("n001", &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval,
		TimeoutSeconds: 60, ToolName: "search", ToolArgs: json.RawMessage(`{"query":"q"}`), CallID: "c1"}))
	if !p.Final() || len(frames) != 1 {
		t.Fatalf("after the first interrupt: final %v, %d frames", p.Final(), len(frames))
	}
	msg := frames[0].StatusUpdate.Status.Message
	if len(msg.Parts) != 3 || msg.Parts[1].Text == nil || msg.Parts[2].Data == nil {
		t.Fatalf("input-required message parts %+v", msg.Parts)
	}
	var d a2a.InterruptData
	if err := json.Unmarshal(msg.Parts[2].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.InterruptID != "i1" || d.Reason != "tool_approval" || d.ToolCallID != "c1" || d.ToolName != "search" ||
		d.AgentID != "n001" || d.Lane != "node:n001" || d.TimeoutSeconds != 60 || d.ExpiresAt != "2026-01-02T03:05:05.004Z" || len(d.ResponseSchema) == 0 {
		t.Fatalf("interrupt data %+v", d)
	}
	if !strings.Contains(*msg.Parts[1].Text, "n001 wants to call search") {
		t.Fatalf("prompt %q", *msg.Parts[1].Text)
	}

	got := describeAll(applyAll(p,
		s.ev(nodeLane("n002"), "n002", &messages.NodeStartedPayload{NodeID: "n002", Goal: "b"}), // progress: not reported
		s.ev(nodeLane("n002"), "n002", &messages.TextDeltaPayload{Delta: "b"}),                  // artifacts still grow
		s.run(&messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, NodeID: "n003", Goal: "c",
			TimeoutSeconds: 60, ExpiresAt: time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)}),
	))
	want := []string{`artifact node:n002 new "b"`, `status INPUT_REQUIRED "Input required: 2 questions are open; a text answer answers the first, data parts naming an interruptId any"`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames:\n got %q\nwant %q", got, want)
	}
	if open := p.Open(); len(open) != 2 || open[0].InterruptID != "i1" || open[1].InterruptID != "i2" {
		t.Fatalf("open %+v", open)
	}
	got = describeAll(p.Apply(s.node("n001", &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove})))
	if want := []string{`status INPUT_REQUIRED "Input required"`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after answering i1: %q", got)
	}
	if p.IsOpen("i1") || !p.IsOpen("i2") || len(p.Task().Status.Message.Parts) != 3 {
		t.Fatalf("after answering i1: open %+v", p.Open())
	}
	if err := json.Unmarshal(p.Task().Status.Message.Parts[2].Data, &d); err != nil || d.InterruptID != "i2" || d.ExpiresAt != "2026-01-02T04:00:00.000Z" || d.NodeID != "n003" {
		t.Fatalf("i2's data %+v (%v): expires_at is taken from the event", d, err)
	}
	got = describeAll(p.Apply(s.run(&messages.InterruptResolvedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, Decision: messages.DecisionApprove})))
	if want := []string{`status WORKING "Input received, resuming"`}; !reflect.DeepEqual(got, want) || p.Final() {
		t.Fatalf("after answering i2: %q, final %v", got, p.Final())
	}
	if got := p.Apply(s.run(&messages.InterruptResolvedPayload{InterruptID: "unknown"})); got != nil {
		t.Fatalf("an unknown interrupt's resolution projected %q", describeAll(got))
	}
}

// TestProjector_OtherRuns: events of other runs of the session are not the
// task's.
func TestProjector_OtherRuns(t *testing.T) {
	t.Parallel()
	s := newScript()
	p := a2a.NewProjector(summary())
	ev := s.run(&messages.RunStartedPayload{Question: "other"})
	ev.RunID = "r2"
	if got := p.Apply(ev); got != nil || p.State() != a2a.StateSubmitted {
		t.Fatalf("another run's event projected %q", describeAll(got))
	}
}

// TestProjector_Deterministic: the frames of a run are a function of its
// events: two projectors fed the same events produce identical JSON.
func TestProjector_Deterministic(t *testing.T) {
	t.Parallel()
	s := newScript()
	evs := append(started(s),
		s.node("n001", &messages.TextDeltaPayload{Delta: "a"}),
		s.node("n001", &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptInfoRequest, Question: "?"}),
		s.node("n001", &messages.InterruptResolvedPayload{InterruptID: "i1", Response: "!"}),
		s.node("n001", &messages.NodeCompletedPayload{NodeID: "n001", Output: "a"}),
		s.run(&messages.RunFinishedPayload{Answer: "done"}),
	)
	a, b := a2a.NewProjector(summary()), a2a.NewProjector(summary())
	for _, ev := range evs {
		ja, _ := json.Marshal(a.Apply(ev))
		jb, _ := json.Marshal(b.Apply(ev))
		if string(ja) != string(jb) {
			t.Fatalf("seq %d: %s != %s", ev.Seq, ja, jb)
		}
	}
}
