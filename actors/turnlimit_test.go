package actors_test

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// loopingModel is the scripted model whose workers call search on every
// turn, never answering: a model that would burn money for ever.
type loopingModel struct {
	*scripted.Model
	turns atomic.Int64 // worker turns started
}

func (m *loopingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role != model.RoleWorker {
		return m.Model.Stream(ctx, req)
	}
	m.turns.Add(1)
	return &oneCall{call: model.ToolCall{ID: "c" + strconv.Itoa(req.Turn), Name: model.ToolSearch, Args: json.RawMessage(`{"query":"more"}`)}}, nil
}

type oneCall struct {
	call model.ToolCall
	sent bool
}

func (s *oneCall) Recv() (model.Chunk, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return &model.Call{Call: s.call}, nil
}
func (s *oneCall) Close() error { return nil }

// TestAgent_TurnLimit: a worker whose model calls a tool on every turn
// stops at MaxAgentTurns: a warning turn_limit_near at 80 % on its lane,
// then node_failed with code turn_limit (not restarted), and exactly that
// many model turns were asked for; the run ends.
func TestAgent_TurnLimit(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 1, Tokens: 2}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	m := &loopingModel{Model: sm}
	e := testkit.NewEngine(t, actors.Config{MaxAgentTurns: 10, Models: func(messages.Scenario) (model.Model, error) { return m, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	if p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload); !ok || p.Code != messages.ErrCodeNodeFailed {
		t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
	}
	failed := payloads[*messages.NodeFailedPayload](events)
	if len(failed) != 1 || failed[0].Code != messages.ModelErrTurnLimit || failed[0].Panicked {
		t.Fatalf("node_failed %+v, want code turn_limit", failed)
	}
	var warned int
	for _, w := range payloads[*messages.WarningPayload](events) {
		if w.Code == messages.WarnTurnLimitNear {
			warned++
		}
	}
	if warned != 1 || m.turns.Load() != 10 || testkit.Count(events, messages.AgentRestarted) != 0 {
		t.Fatalf("%d turn_limit_near warnings, %d worker turns, %d restarts: want 1, 10, 0", warned, m.turns.Load(), testkit.Count(events, messages.AgentRestarted))
	}
}
