package actors_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// badCallsModel is the scripted model whose workers first call search
// with arguments that are not JSON and a tool that does not exist, then
// answer.
type badCallsModel struct{ *scripted.Model }

func (m badCallsModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.Role != model.RoleWorker {
		return m.Model.Stream(ctx, req)
	}
	if req.Turn == 1 {
		return &sliceStream{chunks: []model.Chunk{
			&model.Call{Call: model.ToolCall{ID: "c1", Name: model.ToolSearch, Args: json.RawMessage(`{"query": "sky`)}},
			&model.Call{Call: model.ToolCall{ID: "c2", Name: model.ToolSearch, Args: json.RawMessage(`["sky"]`)}},
			&model.Call{Call: model.ToolCall{ID: "c3", Name: "no_such_tool", Args: json.RawMessage(`{}`)}},
			&model.Usage{},
		}}, nil
	}
	var seen []string
	for _, r := range req.ToolResults {
		if r.IsError {
			seen = append(seen, r.Content)
		}
	}
	return &sliceStream{chunks: []model.Chunk{&model.Text{Text: "saw: " + strings.Join(seen, " | ")}, &model.Usage{}}}, nil
}

// TestAgent_InvalidToolArgumentsAreErrorResults: a call whose arguments
// are not JSON, or not an object, gets an error result the model reads in
// its next turn, as a call of an unknown tool does, and the node
// completes; before, arguments that were not JSON made tool_call_started
// unencodable and failed the node.
func TestAgent_InvalidToolArgumentsAreErrorResults(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 1, Waves: 1, Tokens: 4}
	sm, err := scripted.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return badCallsModel{sm}, nil }})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
		t.Fatalf("terminal %s %+v", env.Type, env.Payload)
	}
	started := payloads[*messages.ToolCallStartedPayload](events)
	if len(started) != 3 || string(started[0].Args) != `"{\"query\": \"sky"` {
		t.Fatalf("tool_call_started %+v: want 3, the first with its text as a JSON string", started)
	}
	results := payloads[*messages.ToolCallFinishedPayload](events)
	if len(results) != 3 {
		t.Fatalf("%d tool results, want 3", len(results))
	}
	for i, want := range []string{`must be a JSON object; got "{\"query\": \"sky"`, `must be a JSON object; got "[\"sky\"]"`, `unknown tool "no_such_tool"`} {
		if !results[i].IsError || !strings.Contains(results[i].Result, want) {
			t.Errorf("result %d %+v, want an error containing %s", i, results[i], want)
		}
	}
	if out := nodeOutput(events, "n001"); !strings.Contains(out, "must be a JSON object") || !strings.Contains(out, "unknown tool") {
		t.Errorf("node output %q: the model did not see the errors", out)
	}
}
