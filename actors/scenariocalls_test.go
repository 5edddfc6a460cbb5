package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/workspace"
)

// sumTool is a tool the scripted model knows only by its schema (as an
// MCP server's): it records its arguments and cites a source.
type sumTool struct {
	mu   *sync.Mutex
	args *[]string
}

func (sumTool) Def() tool.Def {
	return tool.Def{Name: "remote.get-sum", Risk: tool.RiskLow,
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"note":{"type":"string"}},"required":["a","b"]}`)}
}

func (s sumTool) Call(_ context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct{ A, B float64 }
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{}, err
	}
	s.mu.Lock()
	*s.args = append(*s.args, string(args))
	s.mu.Unlock()
	return tool.Result{Content: "the sum is known", Sources: []model.Source{{URL: "https://example.org/sum", Title: "Sums"}}}, nil
}

// TestEngine_ScenarioCalls: a scenario's calls make every worker call the
// named tool with arguments its schema accepts; its sources become the
// run's citations.
func TestEngine_ScenarioCalls(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		args []string
	)
	e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, searchTool{call: func(context.Context, string) (tool.Result, error) {
		return tool.Result{Content: "found"}, nil
	}}, sumTool{&mu, &args})})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q",
		Scenario: &messages.Scenario{Nodes: 3, Waves: 2, Calls: []string{"remote.get-sum"}, Seed: 5}})
	testkit.AssertInvariants(t, events)
	term := testkit.Terminal(events, ref.RunID)
	fin, ok := term.Payload.(*messages.RunFinishedPayload)
	if !ok {
		t.Fatalf("the run ended with %s", term.Type)
	}
	n := 0
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "remote.get-sum" {
			n++
			if p.IsError || p.Result != "the sum is known" {
				t.Errorf("result %+v", p)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 3 || len(args) != 3 {
		t.Fatalf("%d results, calls with %q; want 3 (one per worker)", n, args)
	}
	if len(fin.Citations) != 1 || fin.Citations[0].URL != "https://example.org/sum" {
		t.Errorf("citations %+v", fin.Citations)
	}
}

// TestEngine_ScenarioCallsUnknownTool: a scenario naming a tool the
// engine lacks is an invalid request naming the field, before anything
// starts.
func TestEngine_ScenarioCallsUnknownTool(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	for _, name := range []string{"everything.echo", model.ToolAskHuman} {
		_, err := e.StartRun(context.Background(), messages.StartRun{Question: "q", Scenario: &messages.Scenario{Calls: []string{"search", name}}})
		var fe *messages.FieldError
		if !errors.Is(err, actors.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Field != "scenario.calls[1]" ||
			!strings.Contains(fe.Problem, name) || !strings.Contains(fe.Problem, "its tools: search, publish") {
			t.Errorf("calls [search %s]: %v; want an invalid request about scenario.calls[1]", name, err)
		}
	}
}

// TestEngine_ScenarioCallsWorkspace: workspace.write called through a
// scenario's calls (its schema's defaults as arguments) publishes a file
// event on the writing worker's lane, right before the call's
// tool_call_finished, and the run passes the invariants.
func TestEngine_ScenarioCallsWorkspace(t *testing.T) {
	t.Parallel()
	w, err := workspace.New(workspace.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, append(w.Tools(), searchTool{call: func(context.Context, string) (tool.Result, error) {
		return tool.Result{Content: "found"}, nil
	}})...)})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q",
		Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Calls: []string{workspace.WriteName, workspace.ListName}, Seed: 3}})
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("the run ended with %s", term.Type)
	}
	files, written := 0, int64(0)
	for i, env := range events {
		p, ok := env.Payload.(*messages.FilePayload)
		if !ok {
			continue
		}
		files++
		written += p.Size
		if p.Path != "notes.md" || p.Encoding != "utf-8" || p.Size != int64(len(p.Content)) || p.Tool != workspace.WriteName || p.CallID == "" {
			t.Errorf("file event %+v", p)
		}
		next, ok := events[i+1].Payload.(*messages.ToolCallFinishedPayload)
		if !ok || next.CallID != p.CallID || next.IsError || events[i+1].Lane != env.Lane || !strings.HasPrefix(string(env.Lane.StreamID), "node:") {
			t.Errorf("file event on %+v followed by %s %+v", env.Lane, events[i+1].Type, events[i+1].Payload)
		}
	}
	if files != 2 {
		t.Errorf("%d file events, want 2 (one per worker)", files)
	}
	// The terminal event adds up what the run wrote.
	if fin := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunFinishedPayload); written == 0 || fin.FilesBytes != written {
		t.Errorf("run_finished files_bytes %d, want %d (the file events' sizes)", fin.FilesBytes, written)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir(ref.Tenant, ref.RunID), "notes.md")); err != nil || !strings.HasPrefix(string(b), "# Notes") {
		t.Errorf("workspace file: %q, %v", b, err)
	}
}
