package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
		Schema: json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string", "minLength": 1}, ` +
			`"steps": {"type": "integer", "minimum": 0, "maximum": 100}, "step_ms": {"type": "integer", "minimum": 0, "maximum": 60000}}, ` +
			`"required": ["query"], "additionalProperties": false}`)}
}

// Call answers at once, or, with steps (Scenario.ToolProgressSteps),
// first reports its progress steps times (tool.ReportProgress: "reading
// source i of n"), step_ms apart.
func (searchTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct {
		Query  string `json:"query"`
		Steps  int    `json:"steps"`
		StepMS int    `json:"step_ms"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w for search: %v", tool.ErrInvalidArgs, err)
	}
	for i := 1; i <= in.Steps; i++ {
		tool.ReportProgress(ctx, float64(i), float64(in.Steps), fmt.Sprintf("reading source %d of %d", i, in.Steps))
		if in.StepMS > 0 {
			t := time.NewTimer(time.Duration(in.StepMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return tool.Result{}, ctx.Err()
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: SearchResult(in.Query), Sources: SearchSources(in.Query)}, nil
}

// PublishTool is the scripted high-risk tool (Scenario.RiskyApprovals):
// it "publishes" a text, answering with a deterministic receipt.
func PublishTool() tool.Tool { return publishTool{} }

type publishTool struct{}

func (publishTool) Def() tool.Def {
	return tool.Def{Name: model.ToolPublish, Description: "Publish a text to the outside world (irreversible).", Risk: tool.RiskHigh,
		Schema: json.RawMessage(`{"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"], "additionalProperties": false}`)}
}

func (publishTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, fmt.Errorf("%w for publish: %v", tool.ErrInvalidArgs, err)
	}
	if err := ctx.Err(); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: fmt.Sprintf("published %d bytes", len(in.Text))}, nil
}
