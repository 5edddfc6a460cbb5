package actors_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
)

// TestTools_ProgressIsCoalesced: a Go tool reports its progress through
// tool.ReportProgress from its context, a hundred times in a second; the
// agent publishes tool_call_progress on its lane between the call's
// tool_call_started and tool_call_finished, at most one every
// ProgressInterval (250ms), and the report after a quiet spell goes out at
// once. Reports after the call returned are dropped.
func TestTools_ProgressIsCoalesced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var late context.Context
		crawl := searchTool{call: func(ctx context.Context, _ string) (tool.Result, error) {
			for i := 1; i <= 100; i++ {
				tool.ReportProgress(ctx, float64(i), 100, fmt.Sprintf("page %d", i))
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(time.Second)
			tool.ReportProgress(ctx, 100, 100, "done")
			late = ctx
			return tool.Result{Content: "crawled"}, nil
		}}
		e := testkit.NewEngine(t, actors.Config{Tools: toolSet(t, crawl)})
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, ToolsPerNode: 1}})
		tool.ReportProgress(late, 1, 1, "after the call") // dropped
		testkit.AssertInvariants(t, events)               // rule tool-progress: within its call
		if testkit.Terminal(events, ref.RunID).Type != messages.RunFinished {
			t.Fatal("the run did not finish")
		}
		var got []*messages.ToolCallProgressPayload
		var at []time.Time
		var callID string
		for _, env := range events {
			switch p := env.Payload.(type) {
			case *messages.ToolCallStartedPayload:
				callID = p.CallID
			case *messages.ToolCallProgressPayload:
				if p.CallID != callID || p.Tool != "search" || env.Lane.StreamID != "node:n001" || env.AgentID != "n001" {
					t.Errorf("progress %+v on %s by %s, call %s", p, env.Lane.StreamID, env.AgentID, callID)
				}
				got, at = append(got, p), append(at, env.Timestamp)
			}
		}
		// 0, 250, 500, 750 ms (1s of reports), and "done" 1s later.
		if len(got) < 4 || len(got) > 6 {
			t.Fatalf("%d tool_call_progress for 101 reports: %+v", len(got), got)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Progress < got[i-1].Progress || at[i].Sub(at[i-1]) < actors.DefaultProgressInterval {
				t.Errorf("report %d: %+v at %v after %+v at %v", i, got[i], at[i], got[i-1], at[i-1])
			}
		}
		if first := got[0]; *first != (messages.ToolCallProgressPayload{CallID: callID, Tool: "search", Progress: 1, Total: 100, Message: "page 1"}) {
			t.Errorf("first report %+v", first)
		}
		if last := got[len(got)-1]; last.Progress != 100 || last.Message != "done" {
			t.Errorf("last report %+v, want 100/100 done", last)
		}
	})
}

// TestTools_ScriptedSearchReportsProgress: Scenario.ToolProgressSteps makes
// the scripted search tool report each step; steps further apart than the
// progress interval are each published.
func TestTools_ScriptedSearchReportsProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2, ToolsPerNode: 2, ToolProgressSteps: 3, ToolStepMS: 300}
		_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		steps := map[string][]string{}
		for _, p := range payloads[*messages.ToolCallProgressPayload](events) {
			steps[p.CallID] = append(steps[p.CallID], fmt.Sprintf("%g/%g %s", p.Progress, p.Total, p.Message))
		}
		if len(steps) != 4 {
			t.Fatalf("progress of %d calls, want 4: %v", len(steps), steps)
		}
		for id, s := range steps {
			if want := "[1/3 reading source 1 of 3 2/3 reading source 2 of 3 3/3 reading source 3 of 3]"; fmt.Sprint(s) != want {
				t.Errorf("call %s: %v, want %s", id, s, want)
			}
		}
	})
}
