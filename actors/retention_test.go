package actors

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/conclave-ai/conclave/messages"
)

// TestEngine_StoppedAgentsAreFreed: a run parked on its plan gate must not
// keep its stopped director alive (see sendablePID: protoactor's PIDSet
// keeps a removed child's PID in spare capacity, and a PID caches its
// process).
func TestEngine_StoppedAgentsAreFreed(t *testing.T) {
	var specs []weak.Pointer[agentSpec]
	testHookSpawned = func(s *agentSpec) { specs = append(specs, weak.Make(s)) }
	defer func() { testHookSpawned = nil }()

	e, err := New(Config{InterruptTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	ref, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// Wait until parked on the plan gate, and the director has stopped.
	for parked := false; !parked; {
		evs, err := sub.Next(ctx, nil, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range evs {
			parked = parked || enc.Type == messages.InterruptRaised
		}
	}
	waitFreed(t, specs, 10*time.Second, "stopped agents are still reachable while the run is parked")
}

// waitFreed collects garbage until every pointer of ws is gone, and fails
// with what after timeout.
func waitFreed[T any](t *testing.T, ws []weak.Pointer[T], timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		runtime.GC()
		live := 0
		for _, w := range ws {
			if w.Value() != nil {
				live++
			}
		}
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s", live, len(ws), what)
		}
		runtime.Gosched()
	}
}

// TestEngine_AsleepRunsAreFreed: once a run is asleep, nothing of its
// supervisor stays in memory: not its spec (with its model and outbox),
// not its actor. Failed twice on the way: the run_started payload the run
// index keeps pointed into the spec (&spec.maxReplans), and stopped
// supervisors stayed reachable through the PIDs protoactor caches
// (forgetProcess).
func TestEngine_AsleepRunsAreFreed(t *testing.T) {
	var specs []weak.Pointer[runSpec]
	testHookRunSpawned = func(s *runSpec) { specs = append(specs, weak.Make(s)) }
	defer func() { testHookRunSpawned = nil }()

	e, err := New(Config{InterruptTimeout: time.Hour, SleepAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	const runs = 5
	for range runs {
		if _, err := e.StartRun(ctx, messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, _, _ := e.interrupts.PendingAll(messages.LocalTenant, "", runs)
		if len(list) == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs parked", len(list), runs)
		}
		runtime.Gosched()
	}
	e.SleepParked(0)
	for e.Stats().AsleepRuns < runs {
		if time.Now().After(deadline) {
			t.Fatalf("%+v: not all asleep", e.Stats())
		}
		runtime.Gosched()
	}
	waitFreed(t, specs, time.Until(deadline), "runs asleep still hold their spec")
}
