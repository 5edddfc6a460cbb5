package actors_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

func unlimited(messages.TenantID) actors.Limits {
	return actors.Limits{ConcurrentRuns: -1, RunsPerSecond: -1, EventsPerRun: -1}
}

// checkOutcome fails unless the answer of Abort matches the run's
// terminal event: accepted → run_error{aborted}; refused → ErrRunTerminal
// and any other end.
func checkOutcome(t *testing.T, i int, abortErr error, events []*messages.Envelope, run messages.RunID) {
	t.Helper()
	env := testkit.Terminal(events, run)
	if env == nil {
		t.Fatalf("try %d: no terminal event", i)
	}
	runErr, _ := env.Payload.(*messages.RunErrorPayload)
	aborted := runErr != nil && runErr.Code == messages.ErrCodeAborted
	switch {
	case abortErr == nil && !aborted:
		t.Fatalf("try %d: abort answered accepted, but the run ended with %s %+v", i, env.Type, env.Payload)
	case abortErr != nil && !errors.Is(abortErr, actors.ErrRunTerminal):
		t.Fatalf("try %d: abort = %v", i, abortErr)
	case abortErr != nil && aborted:
		t.Fatalf("try %d: abort answered %v, but the run ended aborted", i, abortErr)
	}
}

// TestEngine_AbortRacingFinishHasOneOutcome races Abort against a run
// finishing on its own, a thousand times, and more until both outcomes
// happened: on a loaded machine the probe that picks the moment lags the
// run, and every abort of the first thousand can come too late.
func TestEngine_AbortRacingFinishHasOneOutcome(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Limits: unlimited})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	accepted, refused := 0, 0
	for i := 0; i < 1000 || (accepted == 0 || refused == 0) && i < 3000; i++ {
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 2}})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		wait := rng.IntN(16) // abort after this many events: anywhere from planning to the end
		switch {
		case i >= 1000 && accepted == 0:
			wait = 0 // right after run_started
		case i >= 1000 && refused == 0:
			wait = 1 << 20 // after the end
		}
		seen := 0
		if _, err := probe.Until(ctx, func(env *messages.Envelope) bool { seen++; return seen > wait || env.Type.Terminal() }); err != nil {
			t.Fatal(err)
		}
		abortErr := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID})
		events, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID))
		probe.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkOutcome(t, i, abortErr, events, ref.RunID)
		if abortErr == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("the race was not exercised: %d accepted, %d refused", accepted, refused)
	}
}

// TestEngine_AbortRacingResumeHasOneOutcome races Abort against a resume
// of the run's plan gate, a thousand times.
func TestEngine_AbortRacingResumeHasOneOutcome(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{Limits: unlimited})
	ctx := context.Background()
	for i := range 1000 {
		ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 1}})
		if err != nil {
			t.Fatal(err)
		}
		probe, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen, err := probe.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised })
		if err != nil {
			t.Fatal(err)
		}
		id := seen[len(seen)-1].Payload.(*messages.InterruptRaisedPayload).InterruptID
		var wg sync.WaitGroup
		var abortErr, resumeErr error
		wg.Go(func() { abortErr = e.Abort(ctx, messages.AbortRun{RunID: ref.RunID}) })
		wg.Go(func() {
			_, resumeErr = e.Resume(messages.Resume{InterruptID: id, Decision: messages.DecisionApprove})
		})
		wg.Wait()
		events, err := probe.Until(ctx, testkit.TerminalOf(ref.RunID))
		probe.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkOutcome(t, i, abortErr, events, ref.RunID)
		if resumeErr != nil && !errors.Is(resumeErr, actors.ErrInterruptConflict) && !errors.Is(resumeErr, actors.ErrInterruptNotFound) {
			t.Fatalf("try %d: resume = %v", i, resumeErr)
		}
	}
}
