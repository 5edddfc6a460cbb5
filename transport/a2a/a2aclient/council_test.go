package a2aclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/a2a/a2aclient"
)

// remoteConclave is a second Conclave serving A2A over HTTP, whose runs
// all follow scenario sc (whatever the caller asks): the remote agent.
type remoteConclave struct {
	engine *actors.Engine
	srv    *httptest.Server
	client *a2aclient.Client
}

func newRemoteConclave(t *testing.T, sc messages.Scenario) *remoteConclave {
	t.Helper()
	e := testkit.NewEngine(t, actors.Config{Models: func(messages.Scenario) (model.Model, error) { return scripted.New(sc) }})
	h, err := a2a.New(a2a.Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.CardPath, h.Card())
	mux.Handle(a2a.RPCPath, h.RPC())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("a2a shutdown: %v", err)
		}
		srv.Close()
	})
	c, err := a2aclient.Dial(t.Context(), srv.URL+a2a.CardPath, a2aclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &remoteConclave{engine: e, srv: srv, client: c}
}

// caller is the Conclave whose council has a remote-agent node.
func caller(t *testing.T, rc *remoteConclave) *actors.Engine {
	t.Helper()
	return callerWith(t, rc, actors.Config{})
}

// callerWith is caller with an engine configured by cfg.
func callerWith(t *testing.T, rc *remoteConclave, cfg actors.Config) *actors.Engine {
	t.Helper()
	var reg remote.Registry
	if err := reg.Add("helper", a2aclient.NewAgent("helper", rc.client), nil); err != nil {
		t.Fatal(err)
	}
	cfg.Remote = &reg
	return testkit.NewEngine(t, cfg)
}

// councilScenario: n001, then n002 (depending on it), run by "helper".
func councilScenario() *messages.Scenario {
	return &messages.Scenario{Nodes: 2, Waves: 2, Tokens: 3, SynthesisTokens: 3,
		Remote: &messages.RemoteScenario{Agent: "helper", Nodes: messages.NodeSelector{IDs: []string{"n002"}}}}
}

// lane returns the events of run on a lane.
func lane(events []*messages.Envelope, stream messages.StreamID) []*messages.Envelope {
	var out []*messages.Envelope
	for _, e := range events {
		if e.Lane.StreamID == stream {
			out = append(out, e)
		}
	}
	return out
}

// TestAgent_Council: a council node run by a second Conclave: its lane
// shows the remote's work (remote_task with the task id first, its text,
// its status updates) and closes with the remote's answer as its output.
func TestAgent_Council(t *testing.T) {
	t.Parallel()
	rc := newRemoteConclave(t, messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, SynthesisTokens: 5})
	e := caller(t, rc)
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "what now", Scenario: councilScenario()})
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("run ended with %s %+v", term.Type, term.Payload)
	}
	n2 := lane(events, messages.NodeStream("n002"))
	if len(n2) < 4 || n2[0].Type != messages.NodeStarted || n2[1].Type != messages.RemoteTask || n2[len(n2)-1].Type != messages.NodeCompleted {
		t.Fatalf("lane node:n002: %v", types(n2))
	}
	first := n2[1].Payload.(*messages.RemoteTaskPayload)
	if first.Agent != "helper" || first.TaskID == "" {
		t.Fatalf("first remote_task %+v", first)
	}
	// The remote's run is the task, its question the node's goal and input.
	rref := actors.RunRef{RunID: messages.RunID(first.TaskID), SessionID: messages.SessionID(first.ContextID)}
	remoteEvents, err := testkit.Follow(t.Context(), rc.engine, rref, 0)
	if err != nil {
		t.Fatal(err)
	}
	started := remoteEvents[0].Payload.(*messages.RunStartedPayload)
	if !strings.Contains(started.Question, "Inputs:\n[n001] ") {
		t.Fatalf("remote question %q", started.Question)
	}
	answer := testkit.Terminal(remoteEvents, rref.RunID).Payload.(*messages.RunFinishedPayload).Answer
	done := n2[len(n2)-1].Payload.(*messages.NodeCompletedPayload)
	if done.Output != answer || answer == "" {
		t.Fatalf("node output %q, remote answer %q", done.Output, answer)
	}
	var text strings.Builder
	var states []string
	for _, ev := range n2 {
		switch p := ev.Payload.(type) {
		case *messages.TextDeltaPayload:
			text.WriteString(p.Delta)
		case *messages.RemoteTaskPayload:
			states = append(states, p.State)
		}
	}
	if !strings.Contains(text.String(), answer) { // every artifact's chunks: the nodes' and the answer's
		t.Fatalf("lane text %q lacks the answer %q", text.String(), answer)
	}
	if states[len(states)-1] != string(a2a.StateCompleted) {
		t.Fatalf("states %v", states)
	}
}

func types(events []*messages.Envelope) []messages.EventType {
	out := make([]messages.EventType, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// TestAgent_CouncilInputRequired: the remote asks a question
// (INPUT_REQUIRED): the node parks on an info_request; the human's
// answer goes to the remote task, which goes on to the end.
func TestAgent_CouncilInputRequired(t *testing.T) {
	t.Parallel()
	t.Run("awake", func(t *testing.T) { t.Parallel(); testInputRequired(t, false) })
	// The caller's run falls asleep while its node waits for the human
	// (its agents stop without cancelling the remote task); the answer
	// wakes it, rebuilt from the journal, parked on the same interrupt,
	// and the answer still reaches the same remote task.
	t.Run("asleep", func(t *testing.T) { t.Parallel(); testInputRequired(t, true) })
}

func testInputRequired(t *testing.T, sleep bool) {
	rc := newRemoteConclave(t, messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 2, InfoRequests: 1})
	cfg := actors.Config{}
	if sleep {
		cfg.SleepAfter = time.Millisecond
	}
	e := callerWith(t, rc, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: councilScenario()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	asked, err := p.Until(ctx, func(ev *messages.Envelope) bool { return ev.Type == messages.InterruptRaised })
	if err != nil {
		t.Fatal(err)
	}
	raised := asked[len(asked)-1]
	in := raised.Payload.(*messages.InterruptRaisedPayload)
	if raised.Lane.StreamID != messages.NodeStream("n002") || in.Kind != messages.InterruptInfoRequest || in.Question == "" {
		t.Fatalf("interrupt on %s: %+v", raised.Lane.StreamID, in)
	}
	if sleep {
		testkit.Eventually(t, func() bool { return e.Stats().AsleepRuns == 1 })
	}
	if _, err := e.Resume(messages.Resume{InterruptID: in.InterruptID, Response: "forty-two"}); err != nil {
		t.Fatal(err)
	}
	rest, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
	if err != nil {
		t.Fatal(err)
	}
	events := append(asked, rest...)
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("run ended with %s %+v", term.Type, term.Payload)
	}
	// The remote's own interrupt got the answer.
	var taskID, ctxID string
	for _, ev := range lane(events, messages.NodeStream("n002")) {
		if p, ok := ev.Payload.(*messages.RemoteTaskPayload); ok {
			taskID, ctxID = p.TaskID, p.ContextID
			break
		}
	}
	remoteEvents, err := testkit.Follow(ctx, rc.engine, actors.RunRef{RunID: messages.RunID(taskID), SessionID: messages.SessionID(ctxID)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var answered string
	for _, ev := range remoteEvents {
		if p, ok := ev.Payload.(*messages.InterruptResolvedPayload); ok {
			answered = p.Response
		}
	}
	if answered != "forty-two" {
		t.Fatalf("the remote's interrupt was answered %q", answered)
	}
}

// TestAgent_CouncilAbort: aborting the run cancels the remote task.
func TestAgent_CouncilAbort(t *testing.T) {
	t.Parallel()
	rc := newRemoteConclave(t, messages.Scenario{Nodes: 1, Tokens: 500, TokenDelayMS: 20})
	e := caller(t, rc)
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: councilScenario()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Working: the remote has named its task and sent some text.
	seen, err := p.Until(ctx, func(ev *messages.Envelope) bool {
		return ev.Type == messages.TextDelta && ev.Lane.StreamID == messages.NodeStream("n002")
	})
	if err != nil {
		t.Fatal(err)
	}
	var taskID string
	for _, ev := range seen {
		if p, ok := ev.Payload.(*messages.RemoteTaskPayload); ok {
			taskID = p.TaskID
			break
		}
	}
	if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID, Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	rest, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
	if err != nil {
		t.Fatal(err)
	}
	term := rest[len(rest)-1].Payload.(*messages.RunErrorPayload)
	if term.Code != messages.ErrCodeAborted {
		t.Fatalf("run ended with %+v", term)
	}
	testkit.AssertInvariants(t, append(seen, rest...))
	testkit.Eventually(t, func() bool {
		task, err := rc.client.GetTask(ctx, taskID)
		return err == nil && task.Status.State == a2a.StateCanceled
	})
}

// TestAgent_CouncilUnavailable: a node naming an agent that could not
// be reached at start fails cleanly, with the reason.
func TestAgent_CouncilUnavailable(t *testing.T) {
	t.Parallel()
	var reg remote.Registry
	if err := reg.Add("helper", nil, errors.New("fetch the agent card: connection refused")); err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Remote: &reg})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: councilScenario()})
	testkit.AssertInvariants(t, events)
	n2 := lane(events, messages.NodeStream("n002"))
	failed, ok := n2[len(n2)-1].Payload.(*messages.NodeFailedPayload)
	if !ok || !strings.Contains(failed.Error, "remote: agent unavailable: \"helper\": fetch the agent card: connection refused") {
		t.Fatalf("lane node:n002 ends %v", n2[len(n2)-1].Payload)
	}
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunError {
		t.Fatalf("run ended with %s", term.Type)
	}
}

// TestAgent_CouncilDelegate: a delegate call naming the remote agent: the
// sub-agent's lane is the remote task, and its answer is the call's result.
func TestAgent_CouncilDelegate(t *testing.T) {
	t.Parallel()
	rc := newRemoteConclave(t, messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 3})
	e := caller(t, rc)
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 2,
		SubagentsPerNode: 1, Remote: &messages.RemoteScenario{Agent: "helper", Delegate: true}}})
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("run ended with %s %+v", term.Type, term.Payload)
	}
	var task *messages.RemoteTaskPayload
	var finished *messages.SubagentFinishedPayload
	var result string
	for _, ev := range events {
		switch p := ev.Payload.(type) {
		case *messages.RemoteTaskPayload:
			if task == nil && ev.Lane.Depth == 2 { // the sub-agent's lane, under node:n001
				task = p
			}
		case *messages.SubagentFinishedPayload:
			finished = p
		case *messages.ToolCallFinishedPayload:
			if p.Tool == "delegate" {
				result = p.Result
			}
		}
	}
	if task == nil || finished == nil || finished.Outcome != messages.OutcomeOK {
		t.Fatalf("remote task %+v, sub-agent %+v", task, finished)
	}
	remoteEvents, err := testkit.Follow(t.Context(), rc.engine, actors.RunRef{RunID: messages.RunID(task.TaskID), SessionID: messages.SessionID(task.ContextID)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	answer := testkit.Terminal(remoteEvents, messages.RunID(task.TaskID)).Payload.(*messages.RunFinishedPayload).Answer
	if finished.Output != answer || result != answer {
		t.Fatalf("sub-agent output %q, delegate result %q, remote answer %q", finished.Output, result, answer)
	}
}

// TestAgent_CouncilToolApproval: a remote that asks to approve a tool call
// (INPUT_REQUIRED with a tool_approval data part) parks the node on a
// tool_approval; the approval goes to the remote task as "approve", a
// rejection as "reject: <feedback>".
func TestAgent_CouncilToolApproval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		resume messages.Resume
		sent   string
	}{
		{"approve", messages.Resume{Decision: messages.DecisionApprove}, `"text":"approve"`},
		{"reject", messages.Resume{Decision: messages.DecisionReject, Feedback: "not now"}, `"text":"reject: not now"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ask := frame(`{"statusUpdate":{"taskId":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"m-3","role":"ROLE_AGENT","parts":[{"text":"n001 wants to call publish"},{"data":{"interruptId":"i-1","reason":"tool_approval","agentId":"n001","lane":"node:n001","toolCallId":"c1","toolName":"publish","toolArgs":{"title":"x"},"timeoutSeconds":600,"responseSchema":{}}}]}}}}`)
			resumed := frame(`{"task":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_WORKING"}}}`)
			f, srv := newFake(t, sampleSubmitted+ask, resumed+sampleChunk1+sampleChunk2+sampleCompleted)
			var reg remote.Registry
			if err := reg.Add("helper", a2aclient.NewAgent("helper", dial(t, srv, a2aclient.Config{})), nil); err != nil {
				t.Fatal(err)
			}
			e := testkit.NewEngine(t, actors.Config{Remote: &reg})
			ctx, cancel := context.WithTimeout(t.Context(), testkit.Watchdog)
			defer cancel()
			ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: councilScenario()})
			if err != nil {
				t.Fatal(err)
			}
			p, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			asked, err := p.Until(ctx, func(ev *messages.Envelope) bool { return ev.Type == messages.InterruptRaised })
			if err != nil {
				t.Fatal(err)
			}
			in := asked[len(asked)-1].Payload.(*messages.InterruptRaisedPayload)
			if in.Kind != messages.InterruptToolApproval || in.ToolName != "publish" || string(in.ToolArgs) != `{"title":"x"}` {
				t.Fatalf("interrupt %+v", in)
			}
			tc.resume.InterruptID = in.InterruptID
			if _, err := e.Resume(tc.resume); err != nil {
				t.Fatal(err)
			}
			rest, err := p.Until(ctx, testkit.TerminalOf(ref.RunID))
			if err != nil {
				t.Fatal(err)
			}
			testkit.AssertInvariants(t, append(asked, rest...))
			if term := rest[len(rest)-1]; term.Type != messages.RunFinished {
				t.Fatalf("run ended with %s", term.Type)
			}
			calls := f.callLog()
			if len(calls) != 2 || !strings.Contains(calls[1], `"taskId":"r-1"`) || !strings.Contains(calls[1], tc.sent) {
				t.Fatalf("calls %q", calls)
			}
		})
	}
}
