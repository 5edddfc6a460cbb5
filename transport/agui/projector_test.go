package agui_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/agui"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	runLane   = messages.RunLane()
	director  = runLane.Child(messages.DirectorStream)
	synthLane = runLane.Child(messages.SynthesisStream)
)

func nodeLane(id string) messages.Lane { return runLane.Child(messages.NodeStream(id)) }

func subLane(node, sub string) messages.Lane {
	n := nodeLane(node)
	return n.Child(messages.SubagentStream(n.StreamID, sub))
}

// script drives a Projector by hand, one envelope at a time.
type script struct {
	t   *testing.T
	p   *agui.Projector
	seq uint64
	v   *verifier
	all []agui.Event
}

func newScript(t *testing.T) *script {
	s := &script{t: t, p: agui.NewProjector("r1"), v: newVerifier("t1")}
	s.feed(s.p.Begin(nil, agui.BeginOptions{ThreadID: "t1", RunID: "a1", Time: t0}))
	return s
}

// feed checks events with the verifier as the client would see them.
func (s *script) feed(evs []agui.Event) []agui.Event {
	s.t.Helper()
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			s.t.Fatal(err)
		}
		if err := s.v.event(b); err != nil {
			s.t.Fatalf("verify: %v\n%s", err, b)
		}
	}
	s.all = append(s.all, evs...)
	return evs
}

func (s *script) env(lane messages.Lane, agent string, p messages.Payload) *messages.Envelope {
	s.seq++
	return &messages.Envelope{ID: uuid.New(), Seq: s.seq, Type: p.EventType(), Timestamp: t0.Add(time.Duration(s.seq) * time.Millisecond),
		SessionID: "t1", RunID: "r1", AgentID: agent, Lane: lane, Payload: p}
}

// apply projects one event and returns its AG-UI events, summarised.
func (s *script) apply(lane messages.Lane, p messages.Payload) []string {
	s.t.Helper()
	return summary(s.feed(s.p.Apply(nil, s.env(lane, "", p))))
}

// summary renders events as "TYPE[@lane] [detail]" for table comparisons.
func summary(evs []agui.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		b, _ := json.Marshal(e)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		s := m["type"].(string)
		if id, ok := m["subagentRunId"].(string); ok {
			s += "@" + strings.TrimPrefix(id, "r1/")
		}
		str := func(k string) string { v, _ := m[k].(string); return strings.TrimPrefix(v, "r1/") }
		switch m["type"] {
		case "CUSTOM":
			s += " " + str("name")
			if v, ok := m["value"].(map[string]any); ok {
				if id, ok := v["toolCallId"].(string); ok {
					s += " " + strings.TrimPrefix(id, "r1/")
				}
			}
		case "STEP_STARTED", "STEP_FINISHED":
			s += " " + str("stepName")
		case "STATE_DELTA":
			for _, op := range m["delta"].([]any) {
				o := op.(map[string]any)
				s += fmt.Sprintf(" %s=%v", o["path"], o["value"])
			}
		case "SUBAGENT_FINISHED":
			if o, ok := m["outcome"].(map[string]any); ok {
				s += " " + o["type"].(string)
				if ids, ok := o["interruptIds"].([]any); ok {
					s += fmt.Sprint(ids)
				}
			}
		case "SUBAGENT_ERROR", "RUN_ERROR":
			s += " " + str("code")
		case "RUN_FINISHED":
			s += " " + m["outcome"].(map[string]any)["type"].(string)
		case "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT":
			s += " " + str("toolCallId")
		case "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
			"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END":
			s += " " + str("messageId")
		}
		out = append(out, s)
	}
	return out
}

var plan2 = messages.Plan{Nodes: []messages.PlanNode{{ID: "n1", Goal: "g1"}, {ID: "n2", Goal: "g2"}, {ID: "n3", Goal: "g3", Deps: []string{"n1"}}}}

// planned brings the script to wave 0 running with n1 and n2 started.
func (s *script) planned() {
	s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
	s.apply(director, &messages.PlanningStartedPayload{Question: "q"})
	s.apply(director, &messages.PlanProposedPayload{Plan: plan2, Waves: [][]string{{"n1", "n2"}, {"n3"}}})
	s.apply(runLane, &messages.PlanApprovedPayload{Automatic: true})
	s.apply(runLane, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"n1", "n2"}})
	s.apply(nodeLane("n1"), &messages.NodeStartedPayload{NodeID: "n1", Goal: "g1"})
	s.apply(nodeLane("n2"), &messages.NodeStartedPayload{NodeID: "n2", Goal: "g2"})
}

// TestProjector_Mapping: every Conclave event type, in context.
func TestProjector_Mapping(t *testing.T) {
	t.Parallel()
	type step struct {
		lane messages.Lane
		p    messages.Payload
		want []string
	}
	cases := []struct {
		name  string
		setup func(*script)
		steps []step
	}{
		{"run and planning", nil, []step{
			{runLane, &messages.RunStartedPayload{Question: "q"}, []string{"CUSTOM conclave.run_started"}},
			{runLane, messages.NewRequestReceived("acme", "q"), []string{"CUSTOM conclave.request_received"}},
			{director, &messages.PlanningStartedPayload{Question: "q"}, []string{"SUBAGENT_STARTED@director"}},
			{director, &messages.TurnStartedPayload{Model: "m", Turn: 1, Attempt: 1}, []string{"CUSTOM@director conclave.turn_started"}},
			{director, &messages.ReasoningDeltaPayload{Delta: "hm"}, []string{"REASONING_START@director m1", "REASONING_MESSAGE_START@director m1", "REASONING_MESSAGE_CONTENT@director m1"}},
			{director, &messages.TextDeltaPayload{Delta: "{"}, []string{"REASONING_MESSAGE_END@director m1", "REASONING_END@director m1", "TEXT_MESSAGE_START@director m2", "TEXT_MESSAGE_CONTENT@director m2"}},
			{director, &messages.TokenUsagePayload{Model: "m", Turn: 1}, []string{"CUSTOM@director conclave.token_usage"}},
			{director, &messages.PlanProposedPayload{Plan: plan2, Waves: [][]string{{"n1", "n2"}, {"n3"}}}, []string{"TEXT_MESSAGE_END@director m2", "SUBAGENT_FINISHED@director success", "STATE_SNAPSHOT"}},
			{runLane, &messages.PlanApprovedPayload{Automatic: true}, []string{"STATE_DELTA /status=running", "CUSTOM conclave.plan_approved"}},
			{runLane, &messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"n1", "n2"}}, []string{"STEP_STARTED wave 0", "STATE_DELTA /wave=0"}},
		}},
		{"planning failed", func(s *script) {
			s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
			s.apply(director, &messages.PlanningStartedPayload{Question: "q"})
		}, []step{
			{director, &messages.TextDeltaPayload{Delta: "x"}, []string{"TEXT_MESSAGE_START@director m1", "TEXT_MESSAGE_CONTENT@director m1"}},
			{director, &messages.PlanningFailedPayload{Error: "bad plan"}, []string{"TEXT_MESSAGE_END@director m1", "SUBAGENT_ERROR@director planning_failed"}},
			{runLane, &messages.RunErrorPayload{Code: messages.ErrCodePlanningFailed, Message: "bad plan"}, []string{"STATE_DELTA /status=failed", "RUN_ERROR planning_failed"}},
		}},
		{"edited plan, rejected plan", func(s *script) {
			s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
			s.apply(director, &messages.PlanningStartedPayload{Question: "q"})
			s.apply(director, &messages.PlanProposedPayload{Plan: plan2, Waves: [][]string{{"n1", "n2"}, {"n3"}}})
		}, []step{
			{runLane, &messages.PlanApprovedPayload{Edited: true, Plan: &plan2, Waves: [][]string{{"n1", "n2"}, {"n3"}}}, []string{"STATE_SNAPSHOT", "CUSTOM conclave.plan_approved"}},
			{runLane, &messages.PlanRejectedPayload{Reason: "no"}, []string{"CUSTOM conclave.plan_rejected"}},
			{runLane, &messages.ReplanAttemptPayload{Attempt: 1, MaxAttempts: 2, Reason: "no"}, []string{"CUSTOM conclave.replan_attempt"}},
		}},
		{"node lifecycle", (*script).planned, []step{
			{nodeLane("n1"), &messages.ReasoningDeltaPayload{Delta: "r"}, []string{"REASONING_START@node:n1 m1", "REASONING_MESSAGE_START@node:n1 m1", "REASONING_MESSAGE_CONTENT@node:n1 m1"}},
			{nodeLane("n2"), &messages.TextDeltaPayload{Delta: "a"}, []string{"TEXT_MESSAGE_START@node:n2 m2", "TEXT_MESSAGE_CONTENT@node:n2 m2"}},
			{nodeLane("n1"), &messages.TextDeltaPayload{Delta: "b"}, []string{"REASONING_MESSAGE_END@node:n1 m1", "REASONING_END@node:n1 m1", "TEXT_MESSAGE_START@node:n1 m3", "TEXT_MESSAGE_CONTENT@node:n1 m3"}},
			{nodeLane("n2"), &messages.TextDeltaPayload{Delta: "c"}, []string{"TEXT_MESSAGE_CONTENT@node:n2 m2"}},
			{nodeLane("n1"), &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search", Args: json.RawMessage(`{"query":"x"}`)},
				[]string{"TEXT_MESSAGE_END@node:n1 m3", "TOOL_CALL_START@node:n1 node:n1#c1", "TOOL_CALL_ARGS@node:n1 node:n1#c1", "TOOL_CALL_END@node:n1 node:n1#c1"}},
			{nodeLane("n1"), messages.NewToolCallProgress("c1", "search", 1, 2, "half"), []string{"CUSTOM@node:n1 conclave.tool_call_progress node:n1#c1"}},
			{nodeLane("n1"), &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "found"}, []string{"TOOL_CALL_RESULT@node:n1 node:n1#c1"}},
			{nodeLane("n1"), &messages.WarningPayload{Code: "w", Message: "careful"}, []string{"CUSTOM@node:n1 conclave.warning"}},
			{nodeLane("n1"), &messages.TextDeltaPayload{Delta: "d"}, []string{"TEXT_MESSAGE_START@node:n1 m4", "TEXT_MESSAGE_CONTENT@node:n1 m4"}},
			{nodeLane("n1"), &messages.AgentRestartedPayload{Attempt: 2, Reason: "panic"}, []string{"TEXT_MESSAGE_END@node:n1 m4", "CUSTOM@node:n1 conclave.agent_restarted"}},
			{nodeLane("n1"), &messages.NodeCompletedPayload{NodeID: "n1", Output: "out"}, []string{"SUBAGENT_FINISHED@node:n1 success", "STATE_DELTA /nodes/n1/status=completed"}},
			{nodeLane("n2"), &messages.NodeFailedPayload{NodeID: "n2", Error: "model error"}, []string{"TEXT_MESSAGE_END@node:n2 m2", "SUBAGENT_ERROR@node:n2 node_failed", "STATE_DELTA /nodes/n2/status=failed"}},
			{runLane, &messages.WaveCompletedPayload{Wave: 0, Completed: 1, Failed: 1}, []string{"STEP_FINISHED wave 0"}},
			{nodeLane("n3"), &messages.NodeSkippedPayload{NodeID: "n3", Reason: "dep", Dependency: "n2"}, []string{"STATE_DELTA /nodes/n3/status=skipped", "CUSTOM conclave.node_skipped"}},
			{runLane, &messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed, Message: "node n2 failed"}, []string{"STATE_DELTA /status=failed", "RUN_ERROR node_failed"}},
		}},
		{"cancelled node", (*script).planned, []step{
			{nodeLane("n1"), &messages.TextDeltaPayload{Delta: "a"}, []string{"TEXT_MESSAGE_START@node:n1 m1", "TEXT_MESSAGE_CONTENT@node:n1 m1"}},
			{nodeLane("n1"), &messages.NodeCancelledPayload{NodeID: "n1", Reason: "aborted"}, []string{"TEXT_MESSAGE_END@node:n1 m1", "SUBAGENT_ERROR@node:n1 cancelled", "STATE_DELTA /nodes/n1/status=cancelled"}},
			{nodeLane("n2"), &messages.NodeCancelledPayload{NodeID: "n2", Reason: "aborted"}, []string{"SUBAGENT_ERROR@node:n2 cancelled", "STATE_DELTA /nodes/n2/status=cancelled"}},
			{runLane, &messages.WaveCompletedPayload{Wave: 0, Cancelled: 2}, []string{"STEP_FINISHED wave 0"}},
			{runLane, &messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "stop"}, []string{"STATE_DELTA /status=aborted", "RUN_ERROR aborted"}},
		}},
		{"sub-agents", (*script).planned, []step{
			{nodeLane("n1"), &messages.ToolCallStartedPayload{CallID: "d1", Tool: "delegate", Args: json.RawMessage(`{"task":"t"}`)},
				[]string{"TOOL_CALL_START@node:n1 node:n1#d1", "TOOL_CALL_ARGS@node:n1 node:n1#d1", "TOOL_CALL_END@node:n1 node:n1#d1"}},
			{subLane("n1", "sub1"), &messages.SubagentStartedPayload{SubagentID: "n1.sub1", Task: "t", CallID: "d1"}, []string{"SUBAGENT_STARTED@node:n1/sub:sub1"}},
			{subLane("n1", "sub1"), &messages.TextDeltaPayload{Delta: "s"}, []string{"TEXT_MESSAGE_START@node:n1/sub:sub1 m1", "TEXT_MESSAGE_CONTENT@node:n1/sub:sub1 m1"}},
			{subLane("n1", "sub1"), &messages.SubagentFinishedPayload{SubagentID: "n1.sub1", Outcome: messages.OutcomeOK, Output: "s"},
				[]string{"TEXT_MESSAGE_END@node:n1/sub:sub1 m1", "SUBAGENT_FINISHED@node:n1/sub:sub1 success"}},
			{nodeLane("n1"), &messages.ToolCallFinishedPayload{CallID: "d1", Tool: "delegate", Result: "s"}, []string{"TOOL_CALL_RESULT@node:n1 node:n1#d1"}},
			{subLane("n2", "sub1"), &messages.SubagentStartedPayload{SubagentID: "n2.sub1", Task: "t", CallID: "d1"}, []string{"SUBAGENT_STARTED@node:n2/sub:sub1"}},
			{subLane("n2", "sub1"), &messages.SubagentFinishedPayload{SubagentID: "n2.sub1", Outcome: messages.OutcomeFailed, Error: "boom"}, []string{"SUBAGENT_ERROR@node:n2/sub:sub1 failed"}},
			{subLane("n2", "sub2"), &messages.SubagentStartedPayload{SubagentID: "n2.sub2", Task: "t", CallID: "d2"}, []string{"SUBAGENT_STARTED@node:n2/sub:sub2"}},
			{subLane("n2", "sub2"), &messages.SubagentFinishedPayload{SubagentID: "n2.sub2", Outcome: messages.OutcomeCancelled}, []string{"SUBAGENT_ERROR@node:n2/sub:sub2 cancelled"}},
		}},
		{"synthesis and success", func(s *script) {
			s.planned()
			s.apply(nodeLane("n1"), &messages.NodeCompletedPayload{NodeID: "n1"})
			s.apply(nodeLane("n2"), &messages.NodeCompletedPayload{NodeID: "n2"})
			s.apply(runLane, &messages.WaveCompletedPayload{Wave: 0, Completed: 2})
		}, []step{
			{synthLane, &messages.SynthesisStartedPayload{Inputs: 2}, []string{"STATE_DELTA /status=synthesizing"}},
			{synthLane, &messages.TextDeltaPayload{Delta: "Answer"}, []string{"TEXT_MESSAGE_START m1", "TEXT_MESSAGE_CONTENT m1"}},
			{synthLane, &messages.SynthesisCompletedPayload{Answer: "Answer"}, []string{"TEXT_MESSAGE_END m1"}},
			{runLane, &messages.RunFinishedPayload{Answer: "Answer"}, []string{"STATE_DELTA /status=finished", "RUN_FINISHED success"}},
		}},
		{"synthesis failed", func(s *script) {
			s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
			s.apply(synthLane, &messages.SynthesisStartedPayload{})
			s.apply(synthLane, &messages.TextDeltaPayload{Delta: "A"})
		}, []step{
			{synthLane, &messages.SynthesisFailedPayload{Error: "x"}, []string{"TEXT_MESSAGE_END m1", "CUSTOM conclave.synthesis_failed"}},
			{runLane, &messages.RunErrorPayload{Code: messages.ErrCodeSynthesis}, []string{"STATE_DELTA /status=failed", "RUN_ERROR synthesis_failed"}},
		}},
		{"interrupts", (*script).planned, []step{
			{nodeLane("n1"), &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, CallID: "c1", ToolName: "search"}, []string{"CUSTOM@node:n1 conclave.interrupt_raised"}},
			{runLane, &messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, NodeID: "n3"}, []string{"STATE_DELTA /nodes/n3/status=awaiting_approval", "CUSTOM conclave.interrupt_raised"}},
			{nodeLane("n1"), &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove}, []string{"CUSTOM@node:n1 conclave.interrupt_resolved"}},
			{runLane, &messages.InterruptExpiredPayload{InterruptID: "i2", Kind: messages.InterruptNodeApproval, Action: messages.DecisionReject}, []string{"CUSTOM conclave.interrupt_expired"}},
		}},
		{"events of other runs and after the end are ignored", func(s *script) {
			s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
			s.apply(runLane, &messages.RunErrorPayload{Code: messages.ErrCodeInternal})
		}, []step{
			{runLane, &messages.WarningPayload{Code: "late"}, nil},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newScript(t)
			if c.setup != nil {
				c.setup(s)
			}
			for i, st := range c.steps {
				got := s.apply(st.lane, st.p)
				if !slices.Equal(got, st.want) && !(len(got) == 0 && len(st.want) == 0) {
					t.Fatalf("step %d (%s):\n got  %q\n want %q", i, st.p.EventType(), got, st.want)
				}
			}
		})
	}
}

// TestProjector_OtherRunIgnored: a session's other runs do not leak in.
func TestProjector_OtherRunIgnored(t *testing.T) {
	t.Parallel()
	s := newScript(t)
	env := s.env(runLane, "", &messages.RunStartedPayload{Question: "q"})
	env.RunID = "r2"
	if got := s.p.Apply(nil, env); len(got) != 0 {
		t.Fatalf("projected another run's event: %v", summary(got))
	}
}

// TestProjector_SuspendAndResume: an interrupt ends the AG-UI run with
// every lane suspended (parked ones naming their interrupt, running ones
// none), the wave step closed and a snapshot; the next AG-UI run reopens
// the same lanes and continues with the tool call's result only.
func TestProjector_SuspendAndResume(t *testing.T) {
	t.Parallel()
	s := newScript(t)
	s.planned()
	s.apply(nodeLane("n1"), &messages.TextDeltaPayload{Delta: "a"})
	s.apply(nodeLane("n2"), &messages.TextDeltaPayload{Delta: "b"})
	s.apply(nodeLane("n1"), &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search", Args: json.RawMessage(`{}`)})
	s.apply(nodeLane("n1"), &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, CallID: "c1", ToolName: "search", TimeoutSeconds: 60})
	if s.p.Blocked() {
		t.Fatal("blocked while n2 streams")
	}
	pend := s.p.Pending()
	if len(pend) != 1 || pend[0].ID != "i1" || pend[0].Kind != messages.InterruptToolApproval {
		t.Fatalf("pending %+v", pend)
	}
	out := s.feed(s.p.Suspend(nil, t0.Add(time.Second), []string{"i1"}, nil))
	want := []string{"TEXT_MESSAGE_END@node:n2 m2", "SUBAGENT_FINISHED@node:n2 suspended", "SUBAGENT_FINISHED@node:n1 suspended[i1]",
		"STEP_FINISHED wave 0", "STATE_SNAPSHOT", "RUN_FINISHED interrupt"}
	if got := summary(out); !slices.Equal(got, want) {
		t.Fatalf("suspend:\n got  %q\n want %q", got, want)
	}
	fin := out[len(out)-1].(*agui.RunFinished)
	in := fin.Outcome.Interrupts[0]
	if in.ID != "i1" || in.Reason != agui.ReasonToolCall || in.ToolCallID != "r1/node:n1#c1" || in.SubagentRunID != "r1/node:n1" ||
		in.ExpiresAt != "2026-01-02T03:05:05.011Z" || len(in.ResponseSchema) == 0 {
		t.Fatalf("interrupt %+v", in)
	}
	if s.p.Active() {
		t.Fatal("still active after Suspend")
	}

	replay := s.p.Clone()
	begin := s.feed(s.p.Begin(nil, agui.BeginOptions{ThreadID: "t1", RunID: "a2", ParentRunID: "a1", Time: t0.Add(2 * time.Second)}))
	want = []string{"RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED wave 0", "SUBAGENT_STARTED@node:n1", "SUBAGENT_STARTED@node:n2"}
	if got := summary(begin); !slices.Equal(got, want) {
		t.Fatalf("begin:\n got  %q\n want %q", got, want)
	}
	steps := [][]string{
		s.apply(nodeLane("n1"), &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove}),
		s.apply(nodeLane("n1"), &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "r"}),
		s.apply(nodeLane("n2"), &messages.TextDeltaPayload{Delta: "c"}),
	}
	want = []string{"CUSTOM@node:n1 conclave.interrupt_resolved", "TOOL_CALL_RESULT@node:n1 node:n1#c1", "TEXT_MESSAGE_START@node:n2 m3", "TEXT_MESSAGE_CONTENT@node:n2 m3"}
	if got := slices.Concat(steps...); !slices.Equal(got, want) {
		t.Fatalf("after resume:\n got  %q\n want %q", got, want)
	}
	if len(s.p.Pending()) != 0 {
		t.Fatal("interrupt still pending")
	}

	// A clone taken between the runs replays the same beginning.
	r := replay.Begin(nil, agui.BeginOptions{ThreadID: "t1", RunID: "a2", ParentRunID: "a1", Time: t0.Add(2 * time.Second)})
	if got := summary(r); !slices.Equal(got, summary(begin)) {
		t.Fatalf("clone begins differently: %q", got)
	}
}

// TestProjector_Blocked: the run is blocked only when every open lane is
// parked or waits for its open children.
func TestProjector_Blocked(t *testing.T) {
	t.Parallel()
	s := newScript(t)
	s.apply(runLane, &messages.RunStartedPayload{Question: "q"})
	if !s.p.Blocked() {
		t.Fatal("no lane open: nothing can progress by itself, so blocked")
	}
	s.apply(director, &messages.PlanningStartedPayload{})
	if s.p.Blocked() {
		t.Fatal("the director works")
	}
	s.apply(director, &messages.PlanProposedPayload{Plan: plan2, Waves: [][]string{{"n1", "n2"}, {"n3"}}})
	s.apply(runLane, &messages.PlanApprovedPayload{})
	s.apply(nodeLane("n1"), &messages.NodeStartedPayload{NodeID: "n1"})
	s.apply(subLane("n1", "sub1"), &messages.SubagentStartedPayload{SubagentID: "n1.sub1", CallID: "d1"})
	if s.p.Blocked() {
		t.Fatal("the sub-agent works")
	}
	s.apply(subLane("n1", "sub1"), &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval})
	if !s.p.Blocked() {
		t.Fatal("the only leaf is parked; its node waits for it")
	}
	s.apply(nodeLane("n2"), &messages.NodeStartedPayload{NodeID: "n2"})
	if s.p.Blocked() {
		t.Fatal("n2 works")
	}
	s.apply(nodeLane("n2"), &messages.InterruptRaisedPayload{InterruptID: "i2", Kind: messages.InterruptInfoRequest, Question: "?"})
	if !s.p.Blocked() {
		t.Fatal("every leaf parked")
	}
	s.apply(subLane("n1", "sub1"), &messages.InterruptResolvedPayload{InterruptID: "i1"})
	if s.p.Blocked() {
		t.Fatal("the sub-agent was answered")
	}
}

// TestProjector_InterruptMapping: each kind becomes the right AG-UI interrupt.
func TestProjector_InterruptMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lane   messages.Lane
		p      *messages.InterruptRaisedPayload
		reason string
		tool   string
		sub    string
		msg    string
	}{
		{nodeLane("n1"), &messages.InterruptRaisedPayload{InterruptID: "a", Kind: messages.InterruptToolApproval, ToolName: "search", ToolArgs: json.RawMessage(`{"q": 1}`), CallID: "c1"},
			agui.ReasonToolCall, "r1/node:n1#c1", "r1/node:n1", `Approve the call of tool search with arguments {"q":1}?`},
		{nodeLane("n1"), &messages.InterruptRaisedPayload{InterruptID: "b", Kind: messages.InterruptInfoRequest, Question: "Which city?", ContextSnippet: "trip", CallID: "c2"},
			agui.ReasonInputRequired, "r1/node:n1#c2", "r1/node:n1", "Which city?\n\ntrip"},
		{runLane, &messages.InterruptRaisedPayload{InterruptID: "c", Kind: messages.InterruptPlanApproval, Plan: &plan2, Waves: [][]string{{"n1"}, {"n2"}}},
			agui.ReasonPlanApproval, "", "", "Approve the plan: 3 nodes in 2 waves?"},
		{runLane, &messages.InterruptRaisedPayload{InterruptID: "d", Kind: messages.InterruptNodeApproval, NodeID: "n3", Goal: "g3"},
			agui.ReasonConfirmation, "", "", "Start node n3: g3?"},
		{runLane, &messages.InterruptRaisedPayload{InterruptID: "e", Kind: messages.InterruptSpawnApproval, NodeID: "n2", Goal: "dig", SuggestedRoles: []string{"researcher", "critic"}},
			agui.ReasonConfirmation, "", "", "Spawn a sub-team for n2: dig (roles: researcher, critic)?"},
		{nodeLane("n1"), &messages.InterruptRaisedPayload{InterruptID: "f", Kind: messages.InterruptChoice, Question: "Which way?", CallID: "c3",
			Options: []messages.ChoiceOption{{ID: "l", Label: "Left", Description: "the short way"}, {ID: "r", Label: "Right"}}},
			agui.ReasonInputRequired, "r1/node:n1#c3", "r1/node:n1", "Which way?\n\nChoose one:\n1. Left (l): the short way\n2. Right (r)"},
	}
	for _, c := range cases {
		s := newScript(t)
		s.planned()
		s.apply(c.lane, c.p)
		exp := t0.Add(time.Hour)
		out := s.feed(s.p.Suspend(nil, t0, []string{c.p.InterruptID}, map[string]time.Time{c.p.InterruptID: exp}))
		in := out[len(out)-1].(*agui.RunFinished).Outcome.Interrupts[0]
		if in.Reason != c.reason || in.ToolCallID != c.tool || in.SubagentRunID != c.sub || in.Message != c.msg || in.ExpiresAt != "2026-01-02T04:04:05.000Z" {
			t.Errorf("%s: %+v", c.p.Kind, in)
		}
		if in.Metadata["conclave"] != c.p {
			t.Errorf("%s: metadata %v", c.p.Kind, in.Metadata)
		}
		if c.p.Kind == messages.InterruptChoice {
			want := `{"type":"object","properties":{"choices":{"type":"array","minItems":1,"maxItems":1,"uniqueItems":true,` +
				`"items":{"type":"string","oneOf":[{"const":"l","title":"Left","description":"the short way"},{"const":"r","title":"Right"}]}}},"required":["choices"]}`
			if string(in.ResponseSchema) != want {
				t.Errorf("choice schema %s\nwant %s", in.ResponseSchema, want)
			}
		}
	}
}

// TestProjector_RealRuns: whole councils from the engine, projected without
// I/O, pass the client's checks: tools, sub-agents, reasoning, panics with
// restarts, a node failing mid-stream.
func TestProjector_RealRuns(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	scenarios := map[string]messages.Scenario{
		"tools and sub-agents": {Nodes: 8, Waves: 3, Tokens: 6, ReasoningTokens: 2, ToolsPerNode: 2, SubagentsPerNode: 2},
		"panics and restarts":  {Nodes: 4, Waves: 2, Tokens: 6, PanicNodes: messages.NodeSelector{IDs: []string{"n002"}}, PanicAttempts: 2},
		"node fails":           {Nodes: 6, Waves: 2, Tokens: 10, FailNodes: messages.NodeSelector{IDs: []string{"n004"}}},
		"debaters with tools":  {Nodes: 2, Waves: 1, Tokens: 6, Debate: &messages.DebateScenario{Agents: 2, Rounds: 2, Tools: []string{"search"}}},
	}
	for name, sc := range scenarios {
		t.Run(name, func(t *testing.T) {
			sc := sc
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
			p := agui.NewProjector(ref.RunID)
			v := newVerifier("t")
			out := p.Begin(nil, agui.BeginOptions{ThreadID: "t", RunID: "a", Time: t0})
			for _, env := range events {
				out = p.Apply(out, env)
			}
			for _, ev := range out {
				b, _ := json.Marshal(ev)
				if err := v.event(b); err != nil {
					t.Fatalf("%v\n%s", err, b)
				}
			}
			if err := v.end(); err != nil {
				t.Fatal(err)
			}
			term := testkit.Terminal(events, ref.RunID)
			last := out[len(out)-1]
			switch term.Type {
			case messages.RunFinished:
				if last.EventType() != agui.TypeRunFinished {
					t.Fatalf("last %s for run_finished", last.EventType())
				}
			case messages.RunError:
				if re, ok := last.(*agui.RunError); !ok || re.Code != string(term.Payload.(*messages.RunErrorPayload).Code) {
					t.Fatalf("last %#v for %v", last, term.Payload)
				}
			}
			if name == "panics and restarts" && !slices.ContainsFunc(out, func(e agui.Event) bool {
				c, ok := e.(*agui.Custom)
				return ok && c.Name == "conclave.agent_restarted"
			}) {
				t.Fatal("no restart projected")
			}
			if name == "node fails" && !slices.ContainsFunc(out, func(e agui.Event) bool {
				c, ok := e.(*agui.SubagentError)
				return ok && c.Code == "node_failed" && strings.HasSuffix(c.SubagentRunID, "node:n004")
			}) {
				t.Fatal("no SUBAGENT_ERROR for n004")
			}
		})
	}
}

// TestProjector_Fail closes what is open and ends with RUN_ERROR.
func TestProjector_Fail(t *testing.T) {
	t.Parallel()
	s := newScript(t)
	s.planned()
	s.apply(nodeLane("n1"), &messages.TextDeltaPayload{Delta: "a"})
	got := summary(s.feed(s.p.Fail(nil, t0, "stream_closed", "bye")))
	want := []string{"TEXT_MESSAGE_END@node:n1 m1", "RUN_ERROR stream_closed"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}
