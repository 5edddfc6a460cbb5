package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/mcp"
)

// TestServers_CouncilThroughACrash (synctest): a council whose workers
// call an MCP server that crashes under them still finishes: the calls
// the crash takes down are error results the model is given, never a
// failed node; the server is restarted after the backoff, and the next
// council's calls all succeed. Both streams pass testkit.Check.
func TestServers_CouncilThroughACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		s, err := mcp.Start(context.Background(), mcp.Config{
			Servers: []mcp.Spec{{Name: "m", Transport: ms.transport}}, Logger: newLogRecorder(t).logger(),
			MinBackoff: time.Second, PingInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after the engine's (cleanups run last first)
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		set, err := tool.NewSet(append([]tool.Tool{scripted.SearchTool()}, s.Tools()...)...)
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.NewEngine(t, actors.Config{Tools: set})

		run := func(calls ...string) map[string][]*messages.ToolCallFinishedPayload {
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 2, Waves: 1, Tokens: 2, Calls: calls}})
			testkit.AssertInvariants(t, events)
			if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
				t.Fatalf("the run ended with %s", term.Type)
			}
			out := map[string][]*messages.ToolCallFinishedPayload{}
			for _, env := range events {
				if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok {
					out[p.Tool] = append(out[p.Tool], p)
				}
			}
			return out
		}

		got := run("m.echo", "m.crash")
		for _, p := range got["m.crash"] {
			if !p.IsError || !(strings.Contains(p.Result, mcp.ErrServerDied.Error()) || strings.Contains(p.Result, mcp.ErrServerDown.Error())) {
				t.Errorf("a crash call: %+v, want an error result saying the server went down", p)
			}
		}
		for _, p := range got["m.echo"] {
			if p.IsError && !strings.Contains(p.Result, "mcp: server") {
				t.Errorf("an echo call: %+v; want its echo or the server's failure", p)
			}
		}
		if len(got["m.crash"]) != 2 || len(got["m.echo"]) != 2 {
			t.Fatalf("results %v, want 2 per tool", got)
		}

		waitStatus(t, s, "m", func(st mcp.Status) bool { return st.Up && st.Restarts == 1 })
		for _, p := range run("m.echo", "m.links")["m.links"] {
			if p.IsError || !strings.Contains(p.Result, "two pages") {
				t.Errorf("links after the restart: %+v", p)
			}
		}
		if _, err := lookup(t, s, "m.echo").Call(context.Background(), nil); err == nil || errors.Is(err, mcp.ErrServerDown) {
			t.Errorf("echo without its message: %v, want the server's refusal", err)
		}
	})
}
