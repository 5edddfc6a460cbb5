package actors

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

// ToolRunner executes tool calls other than the ones the runtime handles
// itself (delegate, the async task tools, spawn_subteam, ask_human).
// RunTool is called from the agent actor and must return promptly; an
// error becomes an error tool result the model can act on.
type ToolRunner interface {
	RunTool(ctx context.Context, call model.ToolCall) (ToolOutput, error)
}

// ToolOutput is a tool's result: its content for the model, and the
// sources it drew on (the run's citation manager numbers them).
type ToolOutput struct {
	Content string
	Sources []model.Source
}

// scriptedTools is the default ToolRunner: the scripted search tool.
type scriptedTools struct{}

func (scriptedTools) RunTool(_ context.Context, call model.ToolCall) (ToolOutput, error) {
	if call.Name != model.ToolSearch {
		return ToolOutput{}, fmt.Errorf("unknown tool %q", call.Name)
	}
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(call.Args, &in); err != nil || in.Query == "" {
		return ToolOutput{}, fmt.Errorf(`search needs {"query": "<text>"}`)
	}
	return ToolOutput{Content: scripted.SearchResult(in.Query), Sources: scripted.SearchSources(in.Query)}, nil
}
