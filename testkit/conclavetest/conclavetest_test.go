package conclavetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/testkit/conclavetest"
	"github.com/conclave-ai/conclave/tool"
)

type lookup struct {
	Query string `json:"query"`
}

// wiki is a program's own tool, replacing the scripted model's search.
func wiki(t *testing.T, calls *atomic.Int64) tool.Tool {
	t.Helper()
	search, err := tool.Func("search", "Look something up in the team wiki.", func(_ context.Context, in lookup) (string, error) {
		calls.Add(1)
		return "The wiki has a page on " + in.Query, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return search
}

func ofType[P any](t *testing.T, events []*conclave.Envelope, typ conclave.EventType) []P {
	t.Helper()
	var out []P
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e.Payload.(P))
		}
	}
	return out
}

func TestHarness_Run(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		h := conclavetest.New(t, conclave.Options{Tools: []tool.Tool{wiki(t, &calls)}})
		run, events := h.Run(conclave.RunRequest{Question: "Why is the sky blue?",
			Scenario: &conclave.Scenario{Nodes: 3, ToolsPerNode: 1}})
		testkit.AssertInvariants(t, events)
		if end := testkit.Terminal(events, run.RunID); end == nil || end.Type != conclave.RunFinished {
			t.Fatalf("the run ended with %v, want run_finished", end)
		}
		if events[0].Seq != 1 {
			t.Fatalf("first event has seq %d, want the session's first", events[0].Seq)
		}
		if calls.Load() != 3 {
			t.Fatalf("the tool was called %d times, want 3 (one per node)", calls.Load())
		}
	})
}

// The tool's first call fails, its second is slow and its third hangs
// until the tool timeout: the run still finishes, the model saw one error
// result, and virtual time passed as the faults said.
func TestHarness_ToolFaults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		faulty := testkit.NewFaultyTool(wiki(t, &calls), func(c testkit.Call) testkit.Fault {
			switch c.N {
			case 1:
				return testkit.Fault{Err: testkit.ErrInjected}
			case 2:
				return testkit.Fault{Delay: 10 * time.Second}
			case 3:
				return testkit.Fault{Hang: true}
			}
			return testkit.Fault{}
		})
		h := conclavetest.New(t, conclave.Options{Tools: []tool.Tool{faulty}, ToolTimeout: 20 * time.Second})
		start := time.Now()
		run, events := h.Run(conclave.RunRequest{Question: "Why is the sky blue?", Concurrency: 1,
			Scenario: &conclave.Scenario{Nodes: 3, ToolsPerNode: 1}})
		took := time.Since(start)
		testkit.AssertInvariants(t, events)
		if end := testkit.Terminal(events, run.RunID); end.Type != conclave.RunFinished {
			t.Fatalf("the run ended with %s, want run_finished", end.Type)
		}
		var failed []string
		for _, p := range ofType[*conclave.ToolCallFinishedPayload](t, events, conclave.ToolCallFinished) {
			if p.IsError {
				failed = append(failed, p.Result)
			}
		}
		if len(failed) != 2 || !strings.Contains(failed[0], testkit.ErrInjected.Error()) {
			t.Fatalf("error results %q, want the injected error and the hung call's timeout", failed)
		}
		if calls.Load() != 1 {
			t.Fatalf("the wiki answered %d calls, want 1 (the slow one)", calls.Load())
		}
		if took < 30*time.Second {
			t.Fatalf("the run took %v of virtual time, want at least the 10s delay and the 20s tool timeout", took)
		}
	})
}

// oneNode is a program's own model: the director plans one node, the
// worker answers, the synthesiser sums up.
type oneNode struct{}

func (oneNode) Name() string { return "one-node" }

func (oneNode) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	var text string
	switch req.Role {
	case model.RoleDirector:
		text = `{"nodes": [{"id": "optics", "goal": "Explain how air scatters sunlight"}]}`
	case model.RoleWorker:
		text = "Air scatters blue light more than red."
	case model.RoleSynthesizer:
		text = fmt.Sprintf("From %d finding: air scatters blue light most.", len(req.Context))
	default:
		return nil, fmt.Errorf("%w: no %s turns", model.ErrModel, req.Role)
	}
	return &chunks{ctx: ctx, next: []model.Chunk{&model.Text{Text: text}}}, nil
}

type chunks struct {
	ctx  context.Context
	next []model.Chunk
}

func (c *chunks) Recv() (model.Chunk, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.next) == 0 {
		return nil, io.EOF
	}
	ch := c.next[0]
	c.next = c.next[1:]
	return ch, nil
}

func (c *chunks) Close() error { return nil }

func TestHarness_ModelFaults(t *testing.T) {
	t.Parallel()
	worker := func(c testkit.Call) bool { return c.AgentID == "optics" && c.Attempt == 1 }
	cases := []struct {
		name  string
		fault testkit.Fault
		end   conclave.EventType
		check func(t *testing.T, events []*conclave.Envelope)
	}{
		{"a transient error restarts the worker", testkit.Fault{Err: model.ErrTransient}, conclave.RunFinished,
			func(t *testing.T, events []*conclave.Envelope) {
				if testkit.Count(events, conclave.AgentRestarted) != 1 {
					t.Errorf("%d agent_restarted, want 1", testkit.Count(events, conclave.AgentRestarted))
				}
			}},
		{"a model error after its first chunk fails the worker", testkit.Fault{Err: errors.New("connection reset"), AfterChunks: 1}, conclave.RunError,
			func(t *testing.T, events []*conclave.Envelope) {
				if testkit.Count(events, conclave.NodeFailed) != 1 {
					t.Errorf("%d node_failed, want 1", testkit.Count(events, conclave.NodeFailed))
				}
			}},
		{"a hanging model meets the idle timeout", testkit.Fault{Hang: true}, conclave.RunError,
			func(t *testing.T, events []*conclave.Envelope) {
				p := ofType[*conclave.NodeFailedPayload](t, events, conclave.NodeFailed)
				if len(p) != 1 || !strings.Contains(fmt.Sprint(*p[0]), string(conclave.ModelErrTimeout)) {
					t.Errorf("node_failed %+v, want one with code timeout", p)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := testkit.NewFaultyModel(oneNode{}, func(call testkit.Call) testkit.Fault {
					if worker(call) {
						return c.fault
					}
					return testkit.Fault{}
				})
				h := conclavetest.New(t, conclave.Options{Model: m, ModelIdleTimeout: time.Minute})
				run, events := h.Run(conclave.RunRequest{Question: "Why is the sky blue?"})
				testkit.AssertInvariants(t, events)
				if end := testkit.Terminal(events, run.RunID); end.Type != c.end {
					t.Fatalf("the run ended with %s (%+v), want %s", end.Type, end.Payload, c.end)
				}
				c.check(t, events)
			})
		})
	}
}

// A restart while the tool hangs: the run is frozen, then resumed by the
// next engine on the same journal, and its events, read back across both
// engines, keep every invariant.
func TestHarness_Restart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		faulty := testkit.NewFaultyTool(wiki(t, &calls), testkit.OnCalls(testkit.Fault{Hang: true}, 1))
		h := conclavetest.New(t, conclave.Options{Tools: []tool.Tool{faulty}})
		run := h.Start(conclave.RunRequest{Question: "Why is the sky blue?",
			Scenario: &conclave.Scenario{Nodes: 2, Waves: 2, ToolsPerNode: 1}})
		p := h.Probe(run)
		p.UntilType(conclave.ToolCallStarted)
		h.Restart()
		if h.Restarts() != 1 {
			t.Fatalf("Restarts() = %d, want 1", h.Restarts())
		}
		events := h.Wait(run)
		testkit.AssertInvariants(t, events)
		if end := testkit.Terminal(events, run.RunID); end.Type != conclave.RunFinished {
			t.Fatalf("the run ended with %s (%+v), want run_finished", end.Type, end.Payload)
		}
		if testkit.Count(events, conclave.RunStarted) != 1 {
			t.Fatalf("%d run_started, want the one run, resumed", testkit.Count(events, conclave.RunStarted))
		}
		if calls.Load() < 2 {
			t.Fatalf("the wiki answered %d calls, want both nodes' after the restart", calls.Load())
		}
	})
}

// A durable journal of the program's own (conclave.OpenJournal), outside a
// bubble: the harness restarts on it and never closes it.
func TestHarness_RestartOnDurableJournal(t *testing.T) {
	t.Parallel()
	j, err := conclave.OpenJournal(t.TempDir(), conclave.JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	})
	h := conclavetest.New(t, conclave.Options{Journal: j})
	first, _ := h.Run(conclave.RunRequest{Question: "one", Scenario: &conclave.Scenario{Nodes: 1}})
	h.Restart()
	second, events := h.Run(conclave.RunRequest{Question: "two", SessionID: first.SessionID,
		Scenario: &conclave.Scenario{Nodes: 1}})
	testkit.AssertInvariants(t, events)
	if testkit.Terminal(events, first.RunID) == nil || testkit.Terminal(events, second.RunID) == nil {
		t.Fatal("the session does not hold both runs' ends")
	}
}
