package scripted

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// SearchTool is the scripted search tool: a deterministic result and
// sources for each query (SearchResult, SearchSources). It is the engine's
// default tool, the one the scripted plans' workers call.
func SearchTool() tool.Tool { return searchTool{} }

type searchTool struct{}

func (searchTool) Def() tool.Def {
	return tool.Def{Name: model.ToolSearch, Description: "Search the web; returns a short summary and its sources.",
		Schema: json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string", "minLength": 1}}, "required": ["query"], "additionalProperties": false}`)}
}

func (searchTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w for search: %v", tool.ErrInvalidArgs, err)
	}
	if err := ctx.Err(); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: SearchResult(in.Query), Sources: SearchSources(in.Query)}, nil
}
