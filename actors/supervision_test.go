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
