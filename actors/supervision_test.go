package actors_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestSupervision_TransientFailuresBackOff: a worker whose model fails
// five times with a transient error (a rate limit) is restarted five times,
// each after a longer wait (exponential backoff with jitter, in virtual
// time), and the sixth attempt completes the run.
func TestSupervision_TransientFailuresBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{RestartLimit: 6, RestartBackoff: time.Second, RestartBackoffMax: time.Minute})
		sc := messages.Scenario{Nodes: 1, Tokens: 4, TransientNodes: messages.NodeSelector{IDs: []string{"n001"}}, TransientAttempts: 5}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
			t.Fatalf("terminal %+v", env.Payload)
		}
		var restarts []*messages.Envelope
		var texts []time.Time // the first text of each attempt after a restart
		for _, env := range events {
			if env.Lane.StreamID != messages.NodeStream("n001") {
				continue
			}
			switch p := env.Payload.(type) {
			case *messages.AgentRestartedPayload:
				if !strings.Contains(p.Reason, "rate limit") || p.Attempt != len(restarts)+2 {
					t.Errorf("agent_restarted %+v", p)
				}
				restarts = append(restarts, env)
			case *messages.TextDeltaPayload:
				if len(texts) < len(restarts) {
					texts = append(texts, env.Timestamp)
				}
			}
		}
		if len(restarts) != 5 || len(texts) != 5 {
			t.Fatalf("%d restarts, %d attempts that streamed after one; want 5", len(restarts), len(texts))
		}
		var prev time.Duration
		for i, at := range texts {
			wait := at.Sub(restarts[i].Timestamp)
			want := time.Second << i // 1s, 2s, 4s, 8s, 16s, ±20 %
			if wait < want*8/10 || wait >= want*12/10 || wait <= prev {
				t.Errorf("restart %d waited %v, want about %v and longer than the one before (%v)", i+1, wait, want, prev)
			}
			prev = wait
		}
	})
}

// TestSupervision_EscalatesAtTheLimit: past the restart limit the worker
// is stopped and its parent closes the lane as failed: the run fails.
func TestSupervision_EscalatesAtTheLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{RestartLimit: 2})
		sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, TransientNodes: messages.NodeSelector{IDs: []string{"n001"}}, TransientAttempts: 5}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
		if !ok || p.Code != messages.ErrCodeNodeFailed || !strings.Contains(p.Message, "rate limit") {
			t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
		}
		if n := testkit.Count(events, messages.AgentRestarted); n != 2 {
			t.Errorf("%d agent_restarted, want 2 (the limit)", n)
		}
	})
}

// TestSupervision_ModelErrorIsNotRetried: a model error that is not
// transient fails the node at once, without a restart.
func TestSupervision_ModelErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 1, Tokens: 4, FailNodes: messages.NodeSelector{IDs: []string{"n001"}}}
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	if n := testkit.Count(events, messages.AgentRestarted); n != 0 {
		t.Errorf("%d agent_restarted for a permanent model error", n)
	}
}

// restartsOn maps each lane to the agent_restarted events on it.
func restartsOn(events []*messages.Envelope) map[messages.StreamID][]*messages.AgentRestartedPayload {
	out := map[messages.StreamID][]*messages.AgentRestartedPayload{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.AgentRestartedPayload); ok {
			out[env.Lane.StreamID] = append(out[env.Lane.StreamID], p)
		}
	}
	return out
}

// teamPanic is a team of three whose first wave (m1, m2) runs while m1
// panics after its first token; m2 streams slowly, so it is still
// running when m1 fails (virtual time: the order is certain).
func teamPanic() messages.Scenario {
	return messages.Scenario{Nodes: 1, Teams: 1, TeamSize: 3, Tokens: 8, TokenDelayMS: 10, PanicMembers: []string{"n001/m1"}}
}

// TestSupervision_TeamAllForOne: with team=all-for-one, a team member's
// panic restarts every running member of its team, each with an
// agent_restarted that names the failed member; the run then finishes.
// (Before supervision could be chosen, a team's members were always
// one-for-one: only m1 restarted; TestSupervision_TeamOneForOneByDefault
// is that case.)
func TestSupervision_TeamAllForOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		sc := teamPanic()
		sup := &messages.Supervision{Team: &messages.SupervisionPolicy{Strategy: messages.SupervisionAllForOne}}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Supervision: sup})
		testkit.AssertInvariants(t, events)
		if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
			t.Fatalf("terminal %+v", env.Payload)
		}
		rs := restartsOn(events)
		if m1 := rs["node:n001/m1"]; len(m1) != 1 || !strings.Contains(m1[0].Reason, "scripted: panic of node n001/m1") {
			t.Errorf("m1 restarts %+v", m1)
		}
		if m2 := rs["node:n001/m2"]; len(m2) != 1 || m2[0].Reason != "all-for-one: n001/m1 failed: scripted: panic of node n001/m1 on attempt 1" || m2[0].Attempt != 2 {
			t.Errorf("m2 restarts %+v, want one naming n001/m1", m2)
		}
		if m3 := rs["node:n001/m3"]; len(m3) != 0 {
			t.Errorf("m3 (not started when m1 failed) restarted: %+v", m3)
		}
		var started *messages.RunStartedPayload
		for _, env := range events {
			if p, ok := env.Payload.(*messages.RunStartedPayload); ok {
				started = p
			}
		}
		if started.Supervision.String() != "team=all-for-one" {
			t.Errorf("run_started supervision %q", started.Supervision.String())
		}
	})
}

// TestSupervision_TeamOneForOneByDefault: without a choice, only the
// failing member restarts.
func TestSupervision_TeamOneForOneByDefault(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{})
		sc := teamPanic()
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
		testkit.AssertInvariants(t, events)
		if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunFinished {
			t.Fatalf("terminal %+v", env.Payload)
		}
		rs := restartsOn(events)
		if len(rs["node:n001/m1"]) != 1 || len(rs["node:n001/m2"]) != 0 {
			t.Errorf("restarts %v, want m1's only", rs)
		}
	})
}

// TestSupervision_StopFailsTheNode: with worker=stop a panicking worker
// is not restarted: its lane fails and so does the run.
func TestSupervision_StopFailsTheNode(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 2, Waves: 1, Tokens: 4, PanicNodes: messages.NodeSelector{IDs: []string{"n001"}}}
	sup := &messages.Supervision{Worker: &messages.SupervisionPolicy{Strategy: messages.SupervisionStop}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Supervision: sup})
	testkit.AssertInvariants(t, events)
	p, ok := testkit.Terminal(events, ref.RunID).Payload.(*messages.RunErrorPayload)
	if !ok || p.Code != messages.ErrCodeNodeFailed || !strings.Contains(p.Message, "not restarted (supervision stop)") {
		t.Fatalf("terminal %+v", testkit.Terminal(events, ref.RunID).Payload)
	}
	if n := testkit.Count(events, messages.AgentRestarted); n != 0 {
		t.Errorf("%d agent_restarted under stop", n)
	}
}

// TestSupervision_ServerDefaultsAndRunChoice: the server's per-role
// choice (Config.Supervision) applies, a run's choice overrides it field
// by field, and run_started records the result: here the server allows
// workers one restart, the run keeps that limit but makes teams
// all-for-one, so a worker panicking twice fails the run after one
// restart.
func TestSupervision_ServerDefaultsAndRunChoice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, actors.Config{Supervision: &messages.Supervision{Worker: &messages.SupervisionPolicy{RestartLimit: 1, BackoffMS: 5}}})
		sc := messages.Scenario{Nodes: 1, Tokens: 4, PanicNodes: messages.NodeSelector{IDs: []string{"n001"}}, PanicAttempts: 2}
		sup := &messages.Supervision{Team: &messages.SupervisionPolicy{Strategy: messages.SupervisionAllForOne}}
		ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Supervision: sup})
		testkit.AssertInvariants(t, events)
		if env := testkit.Terminal(events, ref.RunID); env.Type != messages.RunError {
			t.Fatalf("terminal %+v, want run_error past the server's restart limit of 1", env.Payload)
		}
		if n := testkit.Count(events, messages.AgentRestarted); n != 1 {
			t.Errorf("%d agent_restarted, want 1", n)
		}
		for _, env := range events {
			if p, ok := env.Payload.(*messages.RunStartedPayload); ok && p.Supervision.String() != "worker=default:1@5ms,team=all-for-one" {
				t.Errorf("run_started supervision %q", p.Supervision.String())
			}
		}
	})
}

// TestSupervision_DebaterStop: a debate agent's panic restarts its round
// by default (all-for-one); with debater=stop the debate node fails.
func TestSupervision_DebaterStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sup      *messages.Supervision
		restarts int
		want     messages.EventType
	}{
		{"default", nil, 1, messages.RunFinished},
		{"stop", &messages.Supervision{Debater: &messages.SupervisionPolicy{Strategy: messages.SupervisionStop}}, 0, messages.RunError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := testkit.NewEngine(t, actors.Config{RestartBackoff: -1})
			sc := messages.Scenario{Nodes: 1, Tokens: 4, Debate: &messages.DebateScenario{Agents: 2, Rounds: 1}, PanicMembers: []string{"n001:a2"}}
			ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, Supervision: tc.sup})
			testkit.AssertInvariants(t, events)
			if env := testkit.Terminal(events, ref.RunID); env.Type != tc.want {
				t.Fatalf("terminal %s %+v, want %s", env.Type, env.Payload, tc.want)
			}
			if n := testkit.Count(events, messages.DebateRoundRestarted); n != tc.restarts {
				t.Errorf("%d debate_round_restarted, want %d", n, tc.restarts)
			}
		})
	}
}
