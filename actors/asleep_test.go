package actors_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestEngine_ParkedRunsSleepAndWake: a run parked on humans for longer
// than SleepAfter falls asleep (its actors leave memory) and wakes on the
// answer, for every kind of wait: the plan gate, node gates, tool
// approvals. Falling asleep and waking publish nothing: the run's stream
// is what it would have been awake (no agent_restarted, every interrupt
// raised once and resolved once).
func TestEngine_ParkedRunsSleepAndWake(t *testing.T) {
	t.Parallel()
	for _, hitl := range []messages.HITLMode{messages.HITLPlan, messages.HITLNode, messages.HITLTools} {
		t.Run(string(hitl), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				e := testkit.NewEngine(t, actors.Config{SleepAfter: time.Minute, InterruptTimeout: time.Hour})
				sc := messages.Scenario{Nodes: 3, Waves: 1, Tokens: 2, Approvals: 2}
				slept, waits := 0, 0
				// No watchdog: virtual time passes while the human thinks.
				ref, events := runWithAnswersCtx(t, context.Background(), e, messages.StartRun{Question: "q", HITL: hitl, Scenario: &sc},
					func(*messages.InterruptRaisedPayload) messages.Resume {
						waits++
						time.Sleep(3 * time.Minute) // the human takes a while
						synctest.Wait()
						if s := e.Stats(); s.AsleepRuns == 1 && s.LiveRuns == 1 {
							slept++
						}
						return messages.Resume{Decision: messages.DecisionApprove}
					})
				testkit.AssertInvariants(t, events)
				terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
				if slept == 0 {
					t.Fatalf("the run never fell asleep in %d waits of 3 minutes", waits)
				}
				raised, resolved := map[string]int{}, map[string]int{}
				for _, env := range events {
					switch p := env.Payload.(type) {
					case *messages.AgentRestartedPayload:
						t.Errorf("seq %d: agent_restarted %+v", env.Seq, p)
					case *messages.InterruptRaisedPayload:
						raised[p.InterruptID]++
					case *messages.InterruptResolvedPayload:
						resolved[p.InterruptID]++
					}
				}
				for id, n := range raised {
					if n != 1 || resolved[id] != 1 {
						t.Errorf("interrupt %s raised %d times, resolved %d times", id, n, resolved[id])
					}
				}
				t.Logf("%s: asleep at %d of %d waits", hitl, slept, waits)
				synctest.Wait()
				if s := e.Stats(); s.LiveRuns != 0 || s.AsleepRuns != 0 {
					t.Fatalf("after the run: %+v", s)
				}
			})
		})
	}
}

// untilEnd reads p up to ref's terminal event and returns every event
// read, checked against the stream invariants.
func untilEnd(t *testing.T, p *testkit.Probe, ref actors.RunRef) []*messages.Envelope {
	t.Helper()
	if _, err := p.Until(context.Background(), testkit.TerminalOf(ref.RunID)); err != nil {
		t.Fatal(err)
	}
	events := p.Seen()
	testkit.AssertInvariants(t, events)
	return events
}

// TestEngine_AsleepRunsExpireAbortAndStop: a run asleep wakes for its
// interrupt's timeout, for an abort, for a steering note, and for a
// shutdown that ends runs.
func TestEngine_AsleepRunsExpireAbortAndStop(t *testing.T) {
	t.Parallel()
	start := startAsleep
	t.Run("expiry", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{SleepAfter: time.Minute})
			ref, p := start(t, e, 600)
			events := untilEnd(t, p, ref)
			terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			if exp := payloads[*messages.InterruptExpiredPayload](events); len(exp) != 1 || exp[0].Action != messages.DecisionApprove {
				t.Fatalf("interrupt_expired %+v", exp)
			}
		})
	})
	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{SleepAfter: time.Minute})
			ref, p := start(t, e, 3600)
			ctx := context.Background()
			if err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID, Reason: "no longer needed"}); err != nil {
				t.Fatal(err)
			}
			events := untilEnd(t, p, ref)
			if c := terminal[*messages.RunErrorPayload](t, events, ref.RunID); c.Code != messages.ErrCodeAborted {
				t.Fatalf("terminal %+v", c)
			}
			if res := payloads[*messages.InterruptResolvedPayload](events); len(res) != 1 || res[0].Decision != messages.DecisionCancel {
				t.Fatalf("interrupt_resolved %+v, want one cancel", res)
			}
		})
	})
	t.Run("steer", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{SleepAfter: time.Minute})
			ref, p := start(t, e, 3600)
			ctx := context.Background()
			id, err := e.Steer(ctx, messages.Steer{RunID: ref.RunID, SteerNote: messages.SteerNote{Note: "also cover the history"}})
			if err != nil {
				t.Fatal(err)
			}
			// The run wakes for the note, which waits (as on any run parked
			// on its plan gate) for the gate: approve it, then the note is
			// applied or rejected at the boundary, and the run finishes.
			list, _, err := e.PendingInterrupts(ctx, "", ref.SessionID, "", 10)
			if err != nil || len(list) != 1 {
				t.Fatalf("pending: %+v, %v", list, err)
			}
			if _, err := e.Resume(messages.Resume{InterruptID: list[0].InterruptID, Decision: messages.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			events := untilEnd(t, p, ref)
			terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			ended := 0
			for _, env := range events {
				switch pl := env.Payload.(type) {
				case *messages.SteeringAppliedPayload:
					if pl.SteeringID == id {
						ended++
					}
				case *messages.SteeringRejectedPayload:
					if pl.SteeringID == id {
						ended++
					}
				}
			}
			if ended != 1 {
				t.Fatalf("steering %s ended %d times", id, ended)
			}
		})
	})
	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t, actors.Config{SleepAfter: time.Minute})
			ref, p := start(t, e, 3600)
			ctx := context.Background()
			if err := e.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			events := untilEnd(t, p, ref)
			if c := terminal[*messages.RunErrorPayload](t, events, ref.RunID); c.Code != messages.ErrCodeInterrupted {
				t.Fatalf("terminal %+v", c)
			}
		})
	})
}

// TestEngine_AsleepRunsOutliveAShutdown: a shutdown that keeps runs
// (KeepRunsOnShutdown) returns while runs are asleep or falling asleep,
// and the next engine on the journal has them all back, parked on the
// same interrupts.
func TestEngine_AsleepRunsOutliveAShutdown(t *testing.T) {
	t.Parallel()
	j := journal.NewMemory()
	cfg := actors.Config{Journal: j, KeepRunsOnShutdown: true, SleepAfter: -1, InterruptTimeout: time.Hour,
		Limits: func(messages.TenantID) actors.Limits { return actors.Limits{ConcurrentRuns: -1, RunsPerSecond: -1} }}
	e, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	const runs = 20
	for range runs {
		if _, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	var before []messages.Interrupt
	for len(before) < runs {
		if before, _, err = e.PendingInterrupts(ctx, "", "", "", 2*runs); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d runs parked", len(before), runs)
		}
	}
	e.SleepParked(0) // falling asleep, some of them, while the shutdown comes
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with runs falling asleep: %v", err)
	}
	e2, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Shutdown(context.Background())
	after, _, err := e2.PendingInterrupts(ctx, "", "", "", 2*runs)
	if err != nil || len(after) != runs {
		t.Fatalf("after the restart: %d pending, %v; want %d", len(after), err, runs)
	}
	ids := map[string]bool{}
	for _, in := range before {
		ids[in.InterruptID] = true
	}
	for _, in := range after {
		if !ids[in.InterruptID] {
			t.Fatalf("interrupt %s is new after the restart", in.InterruptID)
		}
	}
}

// unreadable is a memory journal whose reads fail while failing is set.
type unreadable struct {
	*journal.Memory
	failing atomic.Bool
}

func (u *unreadable) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if u.failing.Load() {
		return nil, errors.New("the disk is on fire")
	}
	return u.Memory.ReadAfter(ctx, s, after, limit)
}

// TestEngine_AsleepRunThatCannotWake: a request for a run asleep whose
// events cannot be read is answered with that error at once (it waited
// for its own deadline before), and the run stays asleep; an answer to its
// interrupt is applied by a retried wake once the journal reads again (it
// stayed asleep with its outcome unapplied before).
func TestEngine_AsleepRunThatCannotWake(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		j := &unreadable{Memory: journal.NewMemory()}
		e := testkit.NewEngine(t, actors.Config{Journal: j, SleepAfter: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		ctx := context.Background()
		ref, p := startAsleep(t, e, 0)

		j.failing.Store(true)
		start := time.Now()
		err := e.Abort(ctx, messages.AbortRun{RunID: ref.RunID, Reason: "now"})
		if err == nil || !strings.Contains(err.Error(), "cannot wake") || !strings.Contains(err.Error(), "the disk is on fire") {
			t.Fatalf("Abort of a run that cannot wake = %v", err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("the abort was answered after %v", waited)
		}
		if s := e.Stats(); s.AsleepRuns != 1 {
			t.Fatalf("after a failed wake: %+v, want it still asleep", s)
		}

		// An answer while it still cannot wake is taken (the registry
		// decides), and applied by a retry once the journal reads again.
		pending, _, err := e.PendingInterrupts(ctx, "", ref.SessionID, "", 10)
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending = %+v, %v", pending, err)
		}
		if _, err := e.Resume(messages.Resume{InterruptID: pending[0].InterruptID, Decision: messages.DecisionApprove}); err != nil {
			t.Fatalf("Resume while the run cannot wake: %v", err)
		}
		time.Sleep(3 * time.Second) // two retries fail (after 1 s and 2 s)
		synctest.Wait()
		if s := e.Stats(); s.AsleepRuns != 1 {
			t.Fatalf("while the journal still cannot be read: %+v, want it asleep", s)
		}
		j.failing.Store(false)
		events := untilEnd(t, p, ref) // the next retry (4 s later) wakes it, and it goes on
		terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	})
}

// startAsleep starts a run parked on its plan gate (its interrupt timing
// out after timeout seconds, 0 for the default) and lets it fall asleep
// (SleepAfter one minute; inside a synctest bubble).
func startAsleep(t *testing.T, e *actors.Engine, timeout int) (actors.RunRef, *testkit.Probe) {
	t.Helper()
	ctx := context.Background()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2, Tokens: 2},
		ApprovalTimeoutSeconds: timeout, ApprovalTimeoutAction: messages.DecisionApprove})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, "", ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Minute)
	synctest.Wait()
	if s := e.Stats(); s.AsleepRuns != 1 {
		t.Fatalf("parked for 2 minutes: %+v, want it asleep", s)
	}
	return ref, p
}
