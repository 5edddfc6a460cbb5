package actors_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// hangingModel is the scripted model whose turns for agent (or role, when
// agent is "") send one chunk, then nothing until cancelled.
type hangingModel struct {
	*scripted.Model
	agent string
	role  model.Role
}

func (m hangingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.AgentID == m.agent || (m.agent == "" && req.Role == m.role) {
		return &hangAfterFirst{ctx: ctx}, nil
	}
	return m.Model.Stream(ctx, req)
}

type hangAfterFirst struct {
	ctx  context.Context
	sent bool
}

func (s *hangAfterFirst) Recv() (model.Chunk, error) {
	if !s.sent {
		s.sent = true
		return &model.Text{Text: "Half "}, nil
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}
func (s *hangAfterFirst) Close() error { return nil }

// TestAgent_ModelIdleTimeoutFailsTheNode: a worker whose model hangs after
// its first chunk fails at the idle timeout with node_failed code
// "timeout" (not restarted, not "panicked"), and the run ends; before,
// the run stayed running for ever.
func TestAgent_ModelIdleTimeoutFailsTheNode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4}
		sm, err := scripted.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.NewEngine(t, actors.Config{ModelIdleTimeout: 20 * time.Second,
			Models: func(messages.Scenario) (model.Model, error) { return hangingModel{Model: sm, agent: "n001"}, nil }})
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		if p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeNodeFailed {
			t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
		}
		failed := payloads[*messages.NodeFailedPayload](events)
		if len(failed) != 1 || failed[0].NodeID != "n001" || failed[0].Code != messages.ModelErrTimeout ||
			failed[0].Panicked || failed[0].Attempts != 1 || !strings.Contains(failed[0].Error, "idle timeout") {
			t.Fatalf("node_failed %+v, want n001's with code timeout", failed)
		}
		if n := testkit.Count(events, messages.AgentRestarted); n != 0 {
			t.Errorf("%d agent_restarted, want none", n)
		}
	})
}

// TestAgent_ModelTurnDeadlineFailsPlanning: a director whose turn never
// ends fails planning at the turn deadline with code "timeout".
func TestAgent_ModelTurnDeadlineFailsPlanning(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := messages.Scenario{Nodes: 2, Tokens: 4}
		sm, err := scripted.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.NewEngine(t, actors.Config{ModelIdleTimeout: -1, ModelTurnTimeout: time.Minute,
			Models: func(messages.Scenario) (model.Model, error) {
				return hangingModel{Model: sm, role: model.RoleDirector}, nil
			}})
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		if p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodePlanningFailed {
			t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
		}
		failed := payloads[*messages.PlanningFailedPayload](events)
		if len(failed) != 1 || failed[0].Code != messages.ModelErrTimeout || !strings.Contains(failed[0].Error, "deadline of 1m0s") {
			t.Fatalf("planning_failed %+v, want code timeout", failed)
		}
	})
}

// TestDebate_ModelIdleTimeoutFailsTheNode: a debater whose model hangs
// fails the debate node with code "timeout".
func TestDebate_ModelIdleTimeoutFailsTheNode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 4, Debate: &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 1}}
		sm, err := scripted.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.NewEngine(t, actors.Config{ModelIdleTimeout: 20 * time.Second,
			Models: func(messages.Scenario) (model.Model, error) {
				return hangingModel{Model: sm, role: model.RoleDebater}, nil
			}})
		_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		failed := payloads[*messages.NodeFailedPayload](events)
		if len(failed) != 1 || failed[0].Code != messages.ModelErrTimeout {
			t.Fatalf("node_failed %+v, want the debate node's with code timeout", failed)
		}
	})
}
