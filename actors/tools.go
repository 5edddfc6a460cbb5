package actors

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

// ToolRunner executes tool calls other than delegate (which the runtime
// handles by spawning a sub-agent). RunTool is called from the agent actor
// and must return promptly; an error becomes an error tool result the model
// can act on.
type ToolRunner interface {
	RunTool(ctx context.Context, call model.ToolCall) (string, error)
}

// scriptedTools is the default ToolRunner: the scripted search tool.
type scriptedTools struct{}

func (scriptedTools) RunTool(_ context.Context, call model.ToolCall) (string, error) {
	if call.Name != model.ToolSearch {
		return "", fmt.Errorf("unknown tool %q", call.Name)
	}
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(call.Args, &in); err != nil || in.Query == "" {
		return "", fmt.Errorf(`search needs {"query": "<text>"}`)
	}
	return scripted.SearchResult(in.Query), nil
}
