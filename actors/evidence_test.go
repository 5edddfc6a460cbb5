package actors_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// consequence is what an evidence package says decision d does.
func consequence(t *testing.T, p *messages.InterruptRaisedPayload, d messages.Decision) string {
	t.Helper()
	for _, a := range p.Evidence.RecommendedActions {
		if a.Decision == d {
			return strings.Join(a.Consequences, "; ")
		}
	}
	t.Fatalf("interrupt %s offers no %s", p.InterruptID, d)
	return ""
}

// TestEvidence_IsWhatHappens: what an evidence package says a decision
// does is what the engine does on it (an approver signs the package): a
// plan rejection re-plans while re-plans are left and says so, and ends
// the run with plan_rejected when none is left and says that; the tools
// a plan and a node say their nodes use are the tools they call (a node
// whose worker publishes says publish, and its risk is publish's); a
// refused tool call does not run and its agent carries on; a spawn
// approved adds its team, one rejected leaves the plan as it was. (A
// rejected node's skip: TestHITL_NodeGateRejectSkipsDependents.)
func TestEvidence_IsWhatHappens(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 2, Tokens: 2, Approvals: 2, RiskyApprovals: 1, InfoRequests: 1}
	t.Run("plan: reject re-plans, then ends the run", func(t *testing.T) {
		var said []string
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &sc, MaxReplans: new(1)},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				said = append(said, consequence(t, p, messages.DecisionReject))
				return messages.Resume{Decision: messages.DecisionReject, Reason: "no"}
			})
		testkit.AssertInvariants(t, events)
		if len(said) != 2 || !strings.Contains(said[0], "plans again") || strings.Contains(said[0], "run ends with run_error plan_rejected;") ||
			!strings.Contains(said[1], "run_error plan_rejected") || strings.Contains(said[1], "plans again") {
			t.Fatalf("the reject options said %q", said)
		}
		if rej := payloads[*messages.PlanRejectedPayload](events); len(rej) != 2 || !rej[0].Replanning || rej[1].Replanning {
			t.Fatalf("plan_rejected %+v: want a re-plan, then the end", rej)
		}
		if p := terminal[*messages.RunErrorPayload](t, events, ref.RunID); p.Code != messages.ErrCodePlanRejected {
			t.Fatalf("run_error %+v", p)
		}
	})
	t.Run("plan and nodes: the tools they name are the tools called", func(t *testing.T) {
		var planTools string
		nodeTools := map[string]string{}
		var risks []messages.RiskLevel
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &sc},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				switch p.Kind {
				case messages.InterruptPlanApproval:
					planTools = consequence(t, p, messages.DecisionApprove)
					risks = append(risks, p.Evidence.RiskLevel)
				case messages.InterruptNodeApproval:
					nodeTools[p.NodeID] = consequence(t, p, messages.DecisionApprove)
					risks = append(risks, p.Evidence.RiskLevel)
				case messages.InterruptInfoRequest:
					return messages.Resume{Response: "assume nothing"}
				}
				return messages.Resume{Decision: messages.DecisionApprove}
			})
		testkit.AssertInvariants(t, events)
		terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		called := map[string][]string{} // node -> tools its worker called
		for _, env := range events {
			if p, ok := env.Payload.(*messages.ToolCallStartedPayload); ok {
				node := strings.TrimPrefix(string(env.Lane.StreamID), "node:")
				called[node] = append(called[node], p.Tool)
			}
		}
		if len(called) == 0 {
			t.Fatal("no tool was called")
		}
		for node, tools := range called {
			for _, tool := range tools {
				if !strings.Contains(nodeTools[node], tool) || !strings.Contains(planTools, tool) {
					t.Errorf("node %s called %s; its evidence said %q, the plan's %q", node, tool, nodeTools[node], planTools)
				}
			}
		}
		if !slices.Contains(risks, messages.RiskHigh) {
			t.Errorf("risks %v: the plan (a node publishes) must be high risk", risks)
		}
	})
	t.Run("tool: a refused call does not run, the agent carries on", func(t *testing.T) {
		var said string
		ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLTools, Scenario: &messages.Scenario{Nodes: 1, Tokens: 2, Approvals: 1}},
			func(p *messages.InterruptRaisedPayload) messages.Resume {
				if p.Kind == messages.InterruptToolApproval {
					said = consequence(t, p, messages.DecisionReject)
					return messages.Resume{Decision: messages.DecisionReject, Feedback: "not now"}
				}
				return messages.Resume{Decision: messages.DecisionApprove}
			})
		testkit.AssertInvariants(t, events)
		if !strings.Contains(said, "does not run") || !strings.Contains(said, "error result") || !strings.Contains(said, "carries on") {
			t.Fatalf("the reject option said %q", said)
		}
		res := payloads[*messages.ToolCallFinishedPayload](events)
		fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
		if len(res) != 1 || !res[0].IsError || fin.Nodes.Completed != 1 {
			t.Fatalf("tool results %+v, nodes %+v: want one error result and the node completed", res, fin.Nodes)
		}
	})
	t.Run("spawn: approve adds a team node after this wave, reject keeps the plan", func(t *testing.T) {
		for _, d := range []messages.Decision{messages.DecisionApprove, messages.DecisionReject} {
			var said string
			sc := messages.Scenario{Nodes: 4, Waves: 2, FanIn: 2, Tokens: 2, Spawn: messages.NodeSelector{IDs: []string{"n001"}}}
			ref, events := runWithAnswers(t, e, messages.StartRun{Question: "q", HITL: messages.HITLNode, Scenario: &sc},
				func(p *messages.InterruptRaisedPayload) messages.Resume {
					if p.Kind == messages.InterruptSpawnApproval {
						said = consequence(t, p, d)
						return messages.Resume{Decision: d}
					}
					return messages.Resume{Decision: messages.DecisionApprove}
				})
			testkit.AssertInvariants(t, events)
			fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			spawned := len(payloads[*messages.SubteamSpawnedPayload](events))
			switch {
			case d == messages.DecisionApprove && (!strings.Contains(said, "team node joins the plan") || spawned != 1 || fin.Nodes.Total != 5):
				t.Fatalf("approve said %q; %d spawned, nodes %+v", said, spawned, fin.Nodes)
			case d == messages.DecisionReject && (!strings.Contains(said, "plan stays as it is") || spawned != 0 || fin.Nodes.Total != 4):
				t.Fatalf("reject said %q; %d spawned, nodes %+v", said, spawned, fin.Nodes)
			}
		}
	})
}
