package testkit_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// Lanes of the hand-built runs.
var (
	runLane   = messages.RunLane()
	dirLane   = runLane.Child(messages.DirectorStream)
	synthLane = runLane.Child(messages.SynthesisStream)
)

func nodeLane(id string) messages.Lane { return runLane.Child(messages.NodeStream(id)) }

func subLane(node, k string) messages.Lane {
	l := nodeLane(node)
	return l.Child(messages.SubagentStream(l.StreamID, k))
}

// runBuilder accumulates one run's events in order, before stamping.
type runBuilder struct {
	id     messages.RunID
	events []messages.Emit
}

func newRun(id messages.RunID) *runBuilder { return &runBuilder{id: id} }

// on appends payloads on lane.
func (b *runBuilder) on(lane messages.Lane, ps ...messages.Payload) *runBuilder {
	for _, p := range ps {
		b.events = append(b.events, messages.Emit{RunID: b.id, AgentID: string(lane.StreamID), Lane: lane, Payload: p})
	}
	return b
}

// stamp turns emits into envelopes of session "s1" with seqs from 1, as
// the session hub does.
func stamp(emits []messages.Emit) []*messages.Envelope {
	ts := time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)
	out := make([]*messages.Envelope, len(emits))
	for i := range emits {
		out[i] = emits[i].Stamp(uuid.New(), uint64(i+1), ts.Add(time.Duration(i)*time.Millisecond), "s1")
	}
	return out
}

// interleave merges runs round-robin, keeping each run's own order.
func interleave(runs ...[]messages.Emit) []messages.Emit {
	var out []messages.Emit
	for i := 0; ; i++ {
		n := 0
		for _, r := range runs {
			if i < len(r) {
				out = append(out, r[i])
				n++
			}
		}
		if n == 0 {
			return out
		}
	}
}

// index returns the position of the first emit of type typ on stream.
func index(t *testing.T, emits []messages.Emit, typ messages.EventType, stream messages.StreamID) int {
	t.Helper()
	i := slices.IndexFunc(emits, func(e messages.Emit) bool {
		return e.Payload.EventType() == typ && e.Lane.StreamID == stream
	})
	if i < 0 {
		t.Fatalf("no %s on %s", typ, stream)
	}
	return i
}

func move(emits []messages.Emit, from, to int) []messages.Emit {
	e := emits[from]
	emits = slices.Delete(emits, from, from+1)
	if to > from {
		to--
	}
	return slices.Insert(emits, to, e)
}

func emit(run messages.RunID, lane messages.Lane, p messages.Payload) messages.Emit {
	return messages.Emit{RunID: run, AgentID: string(lane.StreamID), Lane: lane, Payload: p}
}

// withRequestAndProgress is validRun with its request_received and two
// progress reports of node a's delegate call.
func withRequestAndProgress(id messages.RunID) []messages.Emit {
	em := validRun(id)
	em = slices.Insert(em, 1, emit(id, runLane, messages.NewRequestReceived("acme", "Why?")))
	i := slices.IndexFunc(em, func(e messages.Emit) bool { return e.Payload.EventType() == messages.ToolCallFinished })
	return slices.Insert(em, i,
		emit(id, nodeLane("a"), messages.NewToolCallProgress("c1", "delegate", 1, 0, "digging")),
		emit(id, nodeLane("a"), messages.NewToolCallProgress("c1", "delegate", 2, 3, "")))
}

// validRun is a complete successful run: a plan of three nodes in two
// waves (c depends on a and b), a sub-agent delegated from a, an interrupt
// on b, and synthesis.
func validRun(id messages.RunID) []messages.Emit {
	plan := messages.Plan{Nodes: []messages.PlanNode{
		{ID: "a", Goal: "facts"},
		{ID: "b", Goal: "counterpoints"},
		{ID: "c", Goal: "compare", Deps: []string{"a", "b"}},
	}}
	a, b, c, sub := nodeLane("a"), nodeLane("b"), nodeLane("c"), subLane("a", "1")
	return newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "Why?", HITL: messages.HITLTools}).
		on(dirLane,
			&messages.PlanningStartedPayload{Question: "Why?"},
			&messages.ReasoningDeltaPayload{Delta: "think"},
			&messages.TextDeltaPayload{Delta: "{"},
			&messages.TokenUsagePayload{Model: "scripted", Turn: 1, Usage: messages.Usage{InputTokens: 10, OutputTokens: 5}},
			&messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"a", "b"}, {"c"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 3, EstTokens: 6000, EstWallSeconds: 120},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a", "b"}}).
		on(a, &messages.NodeStartedPayload{NodeID: "a", Wave: 0, Goal: "facts"}).
		on(b, &messages.NodeStartedPayload{NodeID: "b", Wave: 0, Goal: "counterpoints"}).
		on(a, &messages.TextDeltaPayload{Delta: "A"}).
		on(b, &messages.ReasoningDeltaPayload{Delta: "hmm"}).
		on(a, &messages.ToolCallStartedPayload{CallID: "c1", Tool: "delegate", Args: []byte(`{"task":"dig"}`)}).
		on(sub, &messages.SubagentStartedPayload{SubagentID: "1", Task: "dig", CallID: "c1", Round: 1}).
		on(sub, &messages.TextDeltaPayload{Delta: "found"}).
		on(b, &messages.InterruptRaisedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, TimeoutSeconds: 60, ToolName: "search", CallID: "c2"}).
		on(sub,
			&messages.TokenUsagePayload{Model: "scripted", Turn: 1},
			&messages.SubagentFinishedPayload{SubagentID: "1", Outcome: messages.OutcomeOK, Output: "found"}).
		on(b, &messages.InterruptResolvedPayload{InterruptID: "i1", Kind: messages.InterruptToolApproval, Decision: messages.DecisionApprove}).
		on(a,
			&messages.ToolCallFinishedPayload{CallID: "c1", Tool: "delegate", Result: "found"},
			&messages.TokenUsagePayload{Model: "scripted", Turn: 1}).
		on(b,
			&messages.TextDeltaPayload{Delta: "B"},
			&messages.TokenUsagePayload{Model: "scripted", Turn: 1},
			&messages.NodeCompletedPayload{NodeID: "b", Output: "B", Attempts: 1}).
		on(a, &messages.NodeCompletedPayload{NodeID: "a", Output: "A", Attempts: 1}).
		on(runLane,
			&messages.WaveCompletedPayload{Wave: 0, Completed: 2},
			&messages.WaveStartedPayload{Wave: 1, NodeIDs: []string{"c"}}).
		on(c,
			&messages.NodeStartedPayload{NodeID: "c", Wave: 1, Goal: "compare", Deps: []string{"a", "b"}},
			&messages.TextDeltaPayload{Delta: "C"},
			&messages.NodeCompletedPayload{NodeID: "c", Output: "C", Attempts: 1}).
		on(runLane, &messages.WaveCompletedPayload{Wave: 1, Completed: 1}).
		on(synthLane,
			&messages.SynthesisStartedPayload{Inputs: 3},
			&messages.TextDeltaPayload{Delta: "answer"},
			&messages.SynthesisCompletedPayload{Answer: "answer"}).
		on(runLane, &messages.RunFinishedPayload{Answer: "answer", Nodes: messages.NodeCounts{Total: 3, Completed: 3}}).
		events
}

// failedRun is validRun's plan where node a fails: b is cancelled, c is
// skipped. With waveOne, wave 1 is started (and completed) around the skip.
func failedRun(id messages.RunID, waveOne bool) []messages.Emit {
	plan := messages.Plan{Nodes: []messages.PlanNode{
		{ID: "a", Goal: "facts"}, {ID: "b", Goal: "counterpoints"}, {ID: "c", Goal: "compare", Deps: []string{"a", "b"}},
	}}
	b := newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "Why?", HITL: messages.HITLNone}).
		on(dirLane,
			&messages.PlanningStartedPayload{Question: "Why?"},
			&messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"a", "b"}, {"c"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 3, EstTokens: 6000, EstWallSeconds: 120},
			&messages.PlanApprovedPayload{Automatic: true},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"a", "b"}}).
		on(nodeLane("a"), &messages.NodeStartedPayload{NodeID: "a", Goal: "facts"}).
		on(nodeLane("b"), &messages.NodeStartedPayload{NodeID: "b", Goal: "counterpoints"}).
		on(nodeLane("a"),
			&messages.AgentRestartedPayload{Attempt: 2, Reason: "panic"},
			&messages.NodeFailedPayload{NodeID: "a", Error: "model error", Attempts: 2}).
		on(nodeLane("b"), &messages.NodeCancelledPayload{NodeID: "b", Reason: "sibling failed"}).
		on(runLane, &messages.WaveCompletedPayload{Wave: 0, Failed: 1, Cancelled: 1})
	if waveOne {
		b.on(runLane, &messages.WaveStartedPayload{Wave: 1, NodeIDs: []string{"c"}})
	}
	b.on(nodeLane("c"), &messages.NodeSkippedPayload{NodeID: "c", Reason: "dependency failed", Dependency: "a"})
	if waveOne {
		b.on(runLane, &messages.WaveCompletedPayload{Wave: 1, Skipped: 1})
	}
	return b.on(runLane, &messages.RunErrorPayload{Code: messages.ErrCodeNodeFailed, Message: "node a failed",
		Nodes: messages.NodeCounts{Total: 3, Failed: 1, Cancelled: 1, Skipped: 1}}).events
}

func rulesOf(vs []testkit.Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Rule) {
			out = append(out, v.Rule)
		}
	}
	return out
}

func dump(vs []testkit.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("\n\t" + v.String())
	}
	return b.String()
}

func TestCheck_Valid(t *testing.T) {
	t.Parallel()
	planningFailed := newRun("r4").
		on(runLane, &messages.RunStartedPayload{Question: "?"}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanningFailedPayload{Error: "no plan"}).
		on(runLane, &messages.RunErrorPayload{Code: messages.ErrCodePlanningFailed}).events
	rejected := newRun("r5").
		on(runLane, &messages.RunStartedPayload{Question: "?", HITL: messages.HITLPlan}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"},
			&messages.PlanProposedPayload{Plan: messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}}}, Waves: [][]string{{"x"}}}).
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 1, EstTokens: 2000, EstWallSeconds: 40},
			&messages.InterruptRaisedPayload{InterruptID: "i", Kind: messages.InterruptPlanApproval, TimeoutSeconds: 60},
			&messages.InterruptResolvedPayload{InterruptID: "i", Kind: messages.InterruptPlanApproval, Decision: messages.DecisionReject},
			&messages.PlanRejectedPayload{Reason: "no"},
			&messages.RunErrorPayload{Code: messages.ErrCodePlanRejected}).events
	tests := []struct {
		name  string
		emits []messages.Emit
	}{
		{"full run", validRun("r1")},
		{"plan rejected, then planned again and approved", replanRun("r6")},
		{"failed run, later wave skipped without wave_started", failedRun("r1", false)},
		{"failed run, later wave skipped inside its wave", failedRun("r1", true)},
		{"planning failed", planningFailed},
		{"plan rejected", rejected},
		{"interleaved runs", interleave(validRun("r1"), failedRun("r2", true), validRun("r3"), planningFailed, rejected)},
		{"request received, tool progress", withRequestAndProgress("r7")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := stamp(tt.emits)
			if vs := testkit.Check(events); len(vs) != 0 {
				t.Errorf("Check: want no violations, got:%s", dump(vs))
			}
			if vs := testkit.CheckPartial(events); len(vs) != 0 {
				t.Errorf("CheckPartial: want no violations, got:%s", dump(vs))
			}
			testkit.AssertInvariants(t, events)
		})
	}
}

// TestCheck_Violations breaks one guarantee per case and expects its rule;
// extra lists the other rules the same mistake is allowed to trip.
func TestCheck_Violations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		events  func(t *testing.T) []*messages.Envelope
		partial bool
		rule    string
		extra   []string
	}{
		{
			name: "gap in seq",
			events: func(t *testing.T) []*messages.Envelope {
				ev := stamp(validRun("r1"))
				return slices.Delete(ev, 3, 4) // a director reasoning_delta
			},
			rule: testkit.RuleSeqGapless,
		},
		{
			name: "seq starts at 2",
			events: func(t *testing.T) []*messages.Envelope {
				ev := stamp(validRun("r1"))
				for _, e := range ev {
					e.Seq++
				}
				return ev
			},
			rule: testkit.RuleSeqGapless,
		},
		{
			name: "second session",
			events: func(t *testing.T) []*messages.Envelope {
				ev := stamp(validRun("r1"))
				ev[5].SessionID = "s2"
				return ev
			},
			rule: testkit.RuleSingleSession,
		},
		{
			name: "duplicate run_started",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.PlanApproved, messages.RunStream)
				return stamp(slices.Insert(em, i+1, em[0]))
			},
			rule: testkit.RuleRunStartedFirst,
		},
		{
			name: "run without run_started",
			events: func(t *testing.T) []*messages.Envelope {
				return stamp(validRun("r1")[1:])
			},
			rule: testkit.RuleRunStartedFirst,
		},
		{
			name: "event after terminal",
			events: func(t *testing.T) []*messages.Envelope {
				return stamp(append(validRun("r1"), emit("r1", runLane, &messages.WarningPayload{Code: "late"})))
			},
			rule: testkit.RuleTerminalOnceLast,
		},
		{
			name: "two terminal events",
			events: func(t *testing.T) []*messages.Envelope {
				return stamp(append(validRun("r1"), emit("r1", runLane, &messages.RunErrorPayload{Code: messages.ErrCodeInternal})))
			},
			rule: testkit.RuleTerminalOnceLast,
		},
		{
			name: "run never ended",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				return stamp(em[:len(em)-1])
			},
			rule: testkit.RuleTerminalOnceLast,
		},
		{
			name: "delta before node_started",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.NodeStarted, "node:c")
				return stamp(slices.Insert(em, i, emit("r1", nodeLane("c"), &messages.TextDeltaPayload{Delta: "early"})))
			},
			rule: testkit.RuleStreamLifecycle,
		},
		{
			name: "delta after node_completed",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.NodeCompleted, "node:b")
				return stamp(slices.Insert(em, i+1, emit("r1", nodeLane("b"), &messages.TextDeltaPayload{Delta: "late"})))
			},
			rule: testkit.RuleStreamLifecycle,
		},
		{
			name: "node_started twice",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.NodeStarted, "node:a")
				return stamp(slices.Insert(em, i+1, em[i]))
			},
			rule: testkit.RuleStreamLifecycle,
		},
		{
			name: "point event with prior events",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.TextDelta, "node:a")
				return stamp(slices.Insert(em, i+1, emit("r1", nodeLane("a"), &messages.NodeSkippedPayload{NodeID: "a"})))
			},
			rule: testkit.RuleStreamLifecycle,
		},
		{
			name: "event after point event",
			events: func(t *testing.T) []*messages.Envelope {
				em := failedRun("r1", false)
				i := index(t, em, messages.NodeSkipped, "node:c")
				return stamp(slices.Insert(em, i+1, emit("r1", nodeLane("c"), &messages.WarningPayload{Code: "ghost"})))
			},
			rule: testkit.RuleStreamLifecycle,
		},
		{
			name: "stream left open at terminal",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.SynthesisCompleted, messages.SynthesisStream)
				return stamp(slices.Delete(em, i, i+1))
			},
			rule: testkit.RuleStreamsClosed,
		},
		{
			name: "sub-agent closes after its node",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				from := index(t, em, messages.SubagentFinished, "node:a/sub:1")
				to := index(t, em, messages.NodeCompleted, "node:a")
				return stamp(move(em, from, to+1))
			},
			rule: testkit.RuleNestedLanes,
		},
		{
			name: "sub-agent opens under a closed node",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.NodeCompleted, "node:b")
				sub := subLane("b", "9")
				return stamp(slices.Insert(em, i+1,
					emit("r1", sub, &messages.SubagentStartedPayload{SubagentID: "9", Round: 1}),
					emit("r1", sub, &messages.SubagentFinishedPayload{SubagentID: "9", Outcome: messages.OutcomeOK})))
			},
			rule: testkit.RuleNestedLanes,
		},
		{
			name: "sub-agent lane depth",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				for i := range em {
					if em[i].Lane.StreamID == "node:a/sub:1" {
						em[i].Lane.Depth = 3
					}
				}
				return stamp(em)
			},
			rule: testkit.RuleLaneDepth,
		},
		{
			name: "lane changes inside a stream",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.TextDelta, "node:a")
				em[i].Lane.Depth = 2
				return stamp(em)
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "wave_started on the director lane",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.WaveStarted, messages.RunStream)
				em[i].Lane = dirLane
				return stamp(em)
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "replan_attempt not right after plan_rejected",
			events: func(t *testing.T) []*messages.Envelope {
				em := replanRun("r1")
				i := index(t, em, messages.ReplanAttempt, messages.RunStream)
				em[i-1], em[i] = em[i], em[i-1] // before plan_rejected
				return stamp(em)
			},
			rule: testkit.RulePlanGate,
		},
		{
			name: "a re-plan on the first plan's director lane",
			events: func(t *testing.T) []*messages.Envelope {
				em := replanRun("r1")
				for i := range em {
					if em[i].Lane.StreamID == messages.DirectorStreamOf(2) {
						em[i].Lane = dirLane
					}
				}
				return stamp(em)
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "wave_started before plan_approved",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.PlanApproved, messages.RunStream)
				return stamp(slices.Delete(em, i, i+1))
			},
			rule: testkit.RulePlanGate,
		},
		{
			name: "node started before dependency completed",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				from := index(t, em, messages.NodeStarted, "node:c")
				to := index(t, em, messages.NodeCompleted, "node:a")
				return stamp(move(em, from, to))
			},
			rule:  testkit.RuleDAGOrder,
			extra: []string{testkit.RuleWaveOrder}, // wave 1 has not started either
		},
		{
			name: "node started after its dependency failed",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				em[index(t, em, messages.NodeCompleted, "node:a")].Payload = &messages.NodeFailedPayload{NodeID: "a", Error: "x"}
				em[index(t, em, messages.WaveCompleted, messages.RunStream)].Payload = &messages.WaveCompletedPayload{Wave: 0, Completed: 1, Failed: 1}
				return stamp(em)
			},
			rule: testkit.RuleDAGOrder,
		},
		{
			name: "node not in the plan",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.NodeStarted, "node:c")
				return stamp(slices.Insert(em, i,
					emit("r1", nodeLane("x"), &messages.NodeStartedPayload{NodeID: "x", Wave: 1}),
					emit("r1", nodeLane("x"), &messages.NodeCompletedPayload{NodeID: "x"})))
			},
			rule: testkit.RuleDAGOrder,
		},
		{
			name: "wave_completed before a node of the wave ended",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				from := index(t, em, messages.WaveCompleted, messages.RunStream)
				to := index(t, em, messages.NodeCompleted, "node:a")
				return stamp(move(em, from, to))
			},
			rule: testkit.RuleWaveOrder,
		},
		{
			name: "node starts outside its wave",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.WaveStarted, messages.RunStream)
				em = slices.Delete(em, i, i+1)
				return stamp(em)
			},
			rule:  testkit.RuleWaveOrder,
			extra: nil, // node_started of a and b, then wave_completed{0} without wave_started{0}
		},
		{
			name: "wave started twice",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.WaveStarted, messages.RunStream)
				return stamp(slices.Insert(em, i+1, em[i]))
			},
			rule: testkit.RuleWaveOrder,
		},
		{
			name: "started wave never completed",
			events: func(t *testing.T) []*messages.Envelope {
				em := failedRun("r1", true)
				i := slices.IndexFunc(em, func(e messages.Emit) bool {
					p, ok := e.Payload.(*messages.WaveCompletedPayload)
					return ok && p.Wave == 1
				})
				return stamp(slices.Delete(em, i, i+1))
			},
			rule: testkit.RuleWaveOrder,
		},
		{
			name: "wave_completed counts disagree",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				em[index(t, em, messages.WaveCompleted, messages.RunStream)].Payload = &messages.WaveCompletedPayload{Wave: 0, Completed: 1}
				return stamp(em)
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "subagent_finished of another sub-agent",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				em[index(t, em, messages.SubagentFinished, "node:a/sub:1")].Payload = &messages.SubagentFinishedPayload{SubagentID: "2", Outcome: messages.OutcomeOK}
				return stamp(em)
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "sub-agent lane not named <parent>/sub:<k>",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				for i := range em {
					if em[i].Lane.StreamID == "node:a/sub:1" {
						em[i].Lane.StreamID = "node:a/helper"
					}
				}
				return stamp(em)
			},
			rule: testkit.RuleLaneShape,
		},
		{
			name: "envelope type differs from payload",
			events: func(t *testing.T) []*messages.Envelope {
				ev := stamp(validRun("r1"))
				ev[2].Type = messages.TextDelta // carries a reasoning_delta payload
				return ev
			},
			rule: testkit.RulePayloadConsistency,
		},
		{
			name: "partial window with a gap",
			events: func(t *testing.T) []*messages.Envelope {
				ev := stamp(validRun("r1"))[4:]
				return slices.Delete(ev, 5, 6)
			},
			partial: true,
			rule:    testkit.RuleSeqGapless,
		},
		{
			name: "request_received twice",
			events: func(t *testing.T) []*messages.Envelope {
				em := withRequestAndProgress("r1")
				return stamp(slices.Insert(em, 2, em[1]))
			},
			rule: testkit.RuleRequestReceived,
		},
		{
			name: "request_received after other events",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.PlanApproved, messages.RunStream)
				return stamp(slices.Insert(em, i+1, emit("r1", runLane, messages.NewRequestReceived("t", "Why?"))))
			},
			rule: testkit.RuleRequestReceived,
		},
		{
			name: "tool_call_progress before its tool_call_started",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.ToolCallStarted, nodeLane("a").StreamID)
				return stamp(slices.Insert(em, i, emit("r1", nodeLane("a"), messages.NewToolCallProgress("c1", "delegate", 1, 2, ""))))
			},
			rule: testkit.RuleToolProgress,
		},
		{
			name: "tool_call_progress after its tool_call_finished",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.ToolCallFinished, nodeLane("a").StreamID)
				return stamp(slices.Insert(em, i+1, emit("r1", nodeLane("a"), messages.NewToolCallProgress("c1", "delegate", 1, 2, ""))))
			},
			rule: testkit.RuleToolProgress,
		},
		{
			name: "tool_call_progress of another lane's call",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.ToolCallStarted, nodeLane("a").StreamID)
				return stamp(slices.Insert(em, i+1, emit("r1", nodeLane("b"), messages.NewToolCallProgress("c1", "delegate", 1, 2, ""))))
			},
			rule: testkit.RuleToolProgress,
		},
		{
			name: "partial window still checks the lanes it sees open",
			events: func(t *testing.T) []*messages.Envelope {
				em := validRun("r1")
				i := index(t, em, messages.SynthesisCompleted, messages.SynthesisStream)
				return stamp(slices.Delete(em, i, i+1))[10:]
			},
			partial: true,
			rule:    testkit.RuleStreamsClosed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := tt.events(t)
			check := testkit.Check
			if tt.partial {
				check = testkit.CheckPartial
			}
			vs := check(events)
			got := rulesOf(vs)
			if !slices.Contains(got, tt.rule) {
				t.Fatalf("want a %s violation, got:%s", tt.rule, dump(vs))
			}
			for _, r := range got {
				if r != tt.rule && !slices.Contains(tt.extra, r) {
					t.Errorf("unexpected %s violation besides %s:%s", r, tt.rule, dump(vs))
				}
			}
		})
	}
}

func TestCheckPartial_Windows(t *testing.T) {
	t.Parallel()
	events := stamp(interleave(validRun("r1"), failedRun("r2", true)))

	t.Run("suffix from seq 5", func(t *testing.T) {
		t.Parallel()
		if vs := testkit.CheckPartial(events[4:]); len(vs) != 0 {
			t.Errorf("want no violations, got:%s", dump(vs))
		}
	})
	t.Run("open runs", func(t *testing.T) {
		t.Parallel()
		prefix := events[:len(events)/2]
		if vs := testkit.CheckPartial(prefix); len(vs) != 0 {
			t.Errorf("CheckPartial: want no violations, got:%s", dump(vs))
		}
		vs := testkit.Check(prefix)
		if got := rulesOf(vs); !slices.Equal(got, []string{testkit.RuleTerminalOnceLast}) || len(vs) != 2 {
			t.Errorf("Check: want one %s violation per open run, got:%s", testkit.RuleTerminalOnceLast, dump(vs))
		}
	})
	t.Run("every window", func(t *testing.T) {
		t.Parallel()
		for i := range events {
			for j := i + 1; j <= len(events); j++ {
				if vs := testkit.CheckPartial(events[i:j]); len(vs) != 0 {
					t.Fatalf("window [%d:%d]: want no violations, got:%s", i, j, dump(vs))
				}
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		if vs := testkit.CheckPartial(nil); len(vs) != 0 {
			t.Errorf("want no violations, got:%s", dump(vs))
		}
	})
}

func TestViolation_String(t *testing.T) {
	t.Parallel()
	v := testkit.Violation{Seq: 7, RunID: "r1", Rule: testkit.RuleDAGOrder, Detail: "boom"}
	if got, want := v.String(), "seq 7 run r1: dag-order: boom"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// recorder captures what AssertInvariants reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestAssertInvariants(t *testing.T) {
	t.Parallel()
	ok := &recorder{TB: t}
	testkit.AssertInvariants(ok, stamp(validRun("r1")))
	if len(ok.errs) != 0 {
		t.Errorf("valid run: got errors %q", ok.errs)
	}

	events := stamp(validRun("r1"))
	for i, e := range events {
		e.Seq = uint64(2*i + 1) // every seq after the first skips one: 30+ violations
	}
	bad := &recorder{TB: t}
	testkit.AssertInvariants(bad, events)
	if len(bad.errs) != 1 {
		t.Fatalf("want one Errorf call, got %d", len(bad.errs))
	}
	msg := bad.errs[0]
	if n := strings.Count(msg, testkit.RuleSeqGapless); n != 20 {
		t.Errorf("want 20 violations listed, got %d:\n%s", n, msg)
	}
	if want := fmt.Sprintf("and %d more", len(events)-1-20); !strings.Contains(msg, want) {
		t.Errorf("want %q in:\n%s", want, msg)
	}
}

// TestRules_Documented keeps docs/events.md and the checker in step.
func TestRules_Documented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range testkit.Rules() {
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("docs/events.md does not document rule `%s`", r)
		}
	}
}

// replanRun: the first plan is rejected, the director plans again on
// director:2, and the second plan is approved and runs.
func replanRun(id messages.RunID) []messages.Emit { return replans(id, 1) }

// replans: the first n plans are rejected, the director plans again each
// time, and plan n+1 is approved and runs.
func replans(id messages.RunID, n int) []messages.Emit {
	plan := messages.Plan{Nodes: []messages.PlanNode{{ID: "x"}}}
	b := newRun(id).
		on(runLane, &messages.RunStartedPayload{Question: "?", HITL: messages.HITLPlan}).
		on(dirLane, &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"x"}}})
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("i%d", i)
		b = b.on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 1},
			&messages.InterruptRaisedPayload{InterruptID: id, Kind: messages.InterruptPlanApproval, TimeoutSeconds: 60},
			&messages.InterruptResolvedPayload{InterruptID: id, Kind: messages.InterruptPlanApproval, Decision: messages.DecisionReject},
			&messages.PlanRejectedPayload{Reason: "no", Replanning: true},
			&messages.ReplanAttemptPayload{Attempt: i, MaxAttempts: n + 1, Reason: "no"}).
			on(runLane.Child(messages.DirectorStreamOf(i+1)), &messages.PlanningStartedPayload{Question: "?"}, &messages.PlanProposedPayload{Plan: plan, Waves: [][]string{{"x"}}})
	}
	return b.
		on(runLane,
			&messages.RunCostEstimatePayload{NodeCount: 1},
			&messages.InterruptRaisedPayload{InterruptID: "approved", Kind: messages.InterruptPlanApproval, TimeoutSeconds: 60},
			&messages.InterruptResolvedPayload{InterruptID: "approved", Kind: messages.InterruptPlanApproval, Decision: messages.DecisionApprove},
			&messages.PlanApprovedPayload{},
			&messages.WaveStartedPayload{Wave: 0, NodeIDs: []string{"x"}}).
		on(nodeLane("x"), &messages.NodeStartedPayload{NodeID: "x"}, &messages.NodeCompletedPayload{NodeID: "x", Output: "X"}).
		on(runLane, &messages.WaveCompletedPayload{Wave: 0, Completed: 1}).
		on(synthLane, &messages.SynthesisStartedPayload{Inputs: 1}, &messages.SynthesisCompletedPayload{Answer: "A"}).
		on(runLane, &messages.RunFinishedPayload{Answer: "A"}).
		events
}
