package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/testkit"
)

// echoAgent answers every task with its message, at once.
type echoAgent struct{}

func (echoAgent) Run(_ context.Context, req remote.Request, emit func(messages.Payload) error) (remote.Result, error) {
	if err := emit(&messages.RemoteTaskPayload{Agent: "echo", TaskID: "t1", State: "TASK_STATE_COMPLETED"}); err != nil {
		return remote.Result{}, err
	}
	return remote.Result{TaskID: "t1", Outcome: remote.Completed, Output: "echo: " + req.Text}, nil
}
func (echoAgent) Cancel(context.Context, string) error { return nil }

// recordingModel records the director's requests.
type recordingModel struct {
	model.Model
	mu     sync.Mutex
	agents [][]model.AgentDef
}

func (m *recordingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role == model.RoleDirector {
		m.mu.Lock()
		m.agents = append(m.agents, req.Agents)
		m.mu.Unlock()
	}
	return m.Model.Stream(ctx, req)
}

// TestEngine_RemoteAgents: the director is told of the available remote
// agents (not of one that is unavailable), and a node naming one has the
// agent's answer as its output.
func TestEngine_RemoteAgents(t *testing.T) {
	t.Parallel()
	var reg remote.Registry
	if err := reg.Add("echo", echoAgent{}, nil); err != nil {
		t.Fatal(err)
	}
	reg.Describe("echo", "Echo — repeats the task")
	if err := reg.Add("down", nil, errors.New("unreachable")); err != nil {
		t.Fatal(err)
	}
	sc := messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 2, Remote: &messages.RemoteScenario{Agent: "echo", Nodes: messages.NodeSelector{IDs: []string{"n001"}}}}
	inner, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingModel{Model: inner}
	e := testkit.NewEngine(t, actors.Config{Remote: &reg, Models: func(messages.Scenario) (model.Model, error) { return rec, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("run ended with %s", term.Type)
	}
	if got := fmt.Sprint(rec.agents); got != "[[{echo Echo — repeats the task}]]" {
		t.Fatalf("the director was told of %s", got)
	}
	var output string
	for _, ev := range events {
		if p, ok := ev.Payload.(*messages.NodeCompletedPayload); ok {
			output = p.Output
		}
	}
	if !strings.HasPrefix(output, "echo: Aspect 1 of 1: ") { // the node's goal, sent as the task
		t.Fatalf("node output %q", output)
	}
}
