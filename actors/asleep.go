package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
)

// Runs asleep. A run that waits only on humans (runstate.Run.Parked: its
// plan gate, node gates, tool approvals, questions) may wait for days. It
// needs nothing in memory but its pending interrupts and its summary: the
// journal holds everything else, and recovery after a restart rebuilds
// such a run exactly (its agents parked again on the same interrupts, no
// event published). So once a run has been parked and silent for
// Config.SleepAfter, it falls asleep:
//
//  1. the engine actor's sweep (every SleepAfter/2) finds it parked in the
//     run index and quiet for SleepAfter, and the interrupt registry agrees
//     to keep its interrupts while its actors are gone (interrupts.Sleep:
//     all journaled, none being resolved);
//  2. its outbox is silenced and its supervisor stopped: it and its agents
//     stop without a word, their interrupts left pending;
//  3. once the supervisor has stopped, a barrier through the session's hub
//     makes sure every event the run sent is journaled, and the run is
//     asleep: an entry of a few fields in the engine, its interrupts in the
//     registry (listed, answerable, timed as before), its summary in the
//     run index. Its hub may then go idle like any hub without a live run.
//
// It wakes on the first thing that needs it: an answer to one of its
// interrupts, an interrupt's timeout, an abort, a steering note, a
// shutdown that ends runs. Waking folds the run's events from the journal
// and starts its supervisor from that state, as recovery does
// (resumeRun); the agents park again on the same interrupts and receive
// any outcome decided while they slept (interrupts.RaiseAt). Requests that
// come while the run is still falling asleep wait and are handled once it
// is awake again. Nothing is published by falling asleep or by waking.

// DefaultSleepAfter is Config.SleepAfter's default.
const DefaultSleepAfter = time.Minute

// Messages of the engine actor for runs asleep.
type (
	// sweepParked asks the engine actor to put parked runs to sleep: those
	// silent for Config.SleepAfter, or for quiet when set (SleepParked).
	sweepParked struct {
		quiet *time.Duration
	}
	// wakeRun asks it to wake a run: one of its interrupts has an outcome.
	wakeRun struct{ id messages.RunID }
	// runSettled: everything a run falling asleep sent its hub is journaled.
	runSettled struct{ id messages.RunID }
)

// sleepState is a run entry's while it falls asleep and sleeps.
type sleepState struct {
	// settled: its supervisor has stopped and its events are journaled;
	// the run can be woken.
	settled bool
	// wake: something needs the run; it wakes as soon as it has settled.
	wake bool
	// then runs once the run is awake again: requests that came while it
	// was falling asleep, or while it slept.
	then []awaiting
	// retry wakes the run again after a failed wake (cannotWake), after a
	// delay that doubles with each failure (failures) up to a minute.
	retry    *time.Timer
	failures int
}

// stopRetry stops a pending retry of a failed wake.
func (st *sleepState) stopRetry() {
	if st.retry != nil {
		st.retry.Stop()
		st.retry = nil
	}
}

// awaiting is what waits for a run to wake: then once it is awake, or
// fail if it cannot wake (its events cannot be read, its supervisor cannot
// start), so that no request waits for its deadline in vain.
type awaiting struct {
	then func(ctx actor.Context)
	fail func(ctx actor.Context, err error)
}

// sweepParkedRuns puts to sleep the live runs that have been parked and
// silent for SleepAfter (or m.quiet).
func (a *engineActor) sweepParkedRuns(ctx actor.Context, m *sweepParked) {
	after := a.e.cfg.SleepAfter
	if m.quiet != nil {
		after = *m.quiet
	} else if after <= 0 {
		return
	}
	if a.closing {
		return
	}
	now := a.e.cfg.Now()
	for id, r := range a.runs {
		if r.sleep != nil || r.ended.Load() {
			continue
		}
		if _, decided := r.spec.outcome.decided(); decided || !a.e.index.Asleep(id, now, after) {
			continue
		}
		a.fallAsleep(ctx, id, r)
	}
}

// fallAsleep starts putting run id to sleep, if the registry agrees.
func (a *engineActor) fallAsleep(ctx actor.Context, id messages.RunID, r *runEntry) {
	root, self := a.e.system.Root, ctx.Self()
	if !a.e.interrupts.Sleep(id, a.e.index.Interrupts(id), func() { root.Send(self, &wakeRun{id: id}) }) {
		return
	}
	r.sleep = &sleepState{}
	r.spec.out.silenced.Store(true)
	ctx.Stop(sendablePID(r.pid)) // a system message: a supervisor parked on its plan gate handles it too; a copy, see sendablePID
}

// supervisorAsleep goes on once the supervisor of a run falling asleep has
// stopped: the run is asleep once its hub has journaled what it sent.
func (a *engineActor) supervisorAsleep(ctx actor.Context, id messages.RunID, r *runEntry) {
	r.pid = nil
	r.spec = nil // the journal has it all: the run's model, outbox and state leave memory
	a.e.asleepCount.Add(1)
	root, self := a.e.system.Root, ctx.Self()
	settled := func() { root.Send(self, &runSettled{id: id}) }
	if s := a.sessions[r.key]; s != nil && !s.idle {
		s.runs--
		s.shared.touch() // idle from now on, not from its last event
		ctx.Send(s.pid, &hubBarrier{then: settled})
		return
	}
	settled() // no hub: it flushed everything when it stopped
}

// settled goes on once a run falling asleep has all its events journaled.
func (a *engineActor) settled(ctx actor.Context, id messages.RunID) {
	r := a.runs[id]
	if r == nil || r.sleep == nil || r.sleep.settled {
		return
	}
	r.sleep.settled = true
	a.e.index.Sleep(id) // its summary stays; its outline state leaves memory
	switch {
	case a.e.frozen.Load():
		// A shutdown that keeps runs began after its supervisor stopped:
		// it is in the journal, and must not hold the shutdown back.
		a.forgetAsleep(id)
		a.maybeStopHubs(ctx)
	case r.sleep.wake:
		a.wake(ctx, id, r)
	}
}

// wakeUp handles a wakeRun: the run wakes now, or once it has settled.
func (a *engineActor) wakeUp(ctx actor.Context, id messages.RunID) {
	r := a.runs[id]
	if r == nil || r.sleep == nil { // awake already, or ended
		return
	}
	if !r.sleep.settled {
		r.sleep.wake = true
		return
	}
	a.wake(ctx, id, r)
}

// whenAwake runs w.then once run r is awake, waking it if it sleeps (or
// w.fail if it cannot wake).
func (a *engineActor) whenAwake(ctx actor.Context, id messages.RunID, r *runEntry, w awaiting) {
	r.sleep.then = append(r.sleep.then, w)
	r.sleep.wake = true
	if r.sleep.settled {
		a.wake(ctx, id, r)
	}
}

// wake rebuilds a settled run from the journal and starts its supervisor
// from that state (resumeRun, as after a restart). If it cannot (the
// journal cannot be read, its session's hub is stopping), it stays asleep
// and is woken again later.
func (a *engineActor) wake(ctx actor.Context, id messages.RunID, r *runEntry) {
	s, err := a.session(r.key)
	var stopping errHubStopping
	switch {
	case errors.As(err, &stopping):
		// Its idle hub is stopping: wake once it has stopped.
		a.sessions[r.key].wakes = append(a.sessions[r.key].wakes, id)
		return
	case err != nil:
		a.cannotWake(ctx, id, r, err)
		return
	case s == nil:
		if s, err = a.newHub(ctx, r.key); err != nil {
			a.cannotWake(ctx, id, r, err)
			return
		}
	}
	st, outline, err := a.e.foldAsleep(id)
	if err != nil {
		a.cannotWake(ctx, id, r, fmt.Errorf("its events cannot be read: %w", err))
		return
	}
	a.e.index.Wake(id, outline)
	r.sleep.stopRetry()
	then := r.sleep.then
	delete(a.runs, id)
	a.e.runCount.Add(-1) // spawnRun counts it again
	a.e.asleepCount.Add(-1)
	if err := a.resumeRun(ctx, s, r.key, &restoredRun{Run: st}); err != nil {
		a.e.cfg.Logger.Error("run asleep cannot wake", "run", id, "err", err)
	}
	for _, w := range then {
		w.then(ctx)
	}
}

// cannotWake leaves run r asleep after a failed wake and answers what was
// waiting for it with the error. Something needed the run (an answer, a
// timeout): it tries again after 1 s, 2 s, 4 s... up to a minute, so that a
// passing failure (a journal that cannot be read for a while) does not
// leave it asleep with an outcome nobody applies.
func (a *engineActor) cannotWake(ctx actor.Context, id messages.RunID, r *runEntry, err error) {
	delay := min(time.Second<<min(r.sleep.failures, 6), time.Minute)
	r.sleep.failures++
	a.e.cfg.Logger.Error("run asleep cannot wake", "run", id, "retry_in", delay, "err", err)
	root, self := a.e.system.Root, ctx.Self()
	r.sleep.stopRetry()
	r.sleep.retry = time.AfterFunc(delay, func() { root.Send(self, &wakeRun{id: id}) })
	waiting := r.sleep.then
	r.sleep.then, r.sleep.wake = nil, false
	err = fmt.Errorf("actors: run %s is asleep and cannot wake: %w", id, err)
	for _, w := range waiting {
		if w.fail != nil {
			w.fail(ctx, err)
		}
	}
}

// foldAsleep folds the events of run id, asleep, from the journal: its
// state for its supervisor, and its outline for the run index.
func (e *Engine) foldAsleep(id messages.RunID) (st, outline *runstate.Run, err error) {
	ctx := context.Background()
	info, _, err := e.catalog.Run(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("actors: run %s: %w", id, err)
	}
	// Its events lie between its first and its last (as the run index
	// has it; nothing of the run was journaled after it fell asleep).
	st, outline = runstate.New(id), runstate.NewOutline(id)
	err = e.scanRuns(ctx, info.Session, info.FirstSeq, e.index.LastSeq(id), map[messages.RunID]bool{id: true},
		func(env *messages.Envelope) bool { st.Apply(env); outline.Apply(env); return true })
	return st, outline, err
}

// forgetAsleep drops a run asleep from memory at a shutdown that keeps
// runs: the next engine on the journal rebuilds it as any live run.
func (a *engineActor) forgetAsleep(id messages.RunID) {
	if r := a.runs[id]; r != nil && r.sleep != nil {
		r.sleep.stopRetry()
	}
	delete(a.runs, id)
	a.e.runCount.Add(-1)
	a.e.asleepCount.Add(-1)
}

// SleepParked puts to sleep, now, the runs that wait only on humans and
// have published nothing for quiet (0: every such run). The sweep of
// Config.SleepAfter does it on its own; this is for drivers of
// deterministic simulations (testkit/sim), which keep sweeps off their
// schedule (SleepAfter -1) and choose when runs fall asleep.
func (e *Engine) SleepParked(quiet time.Duration) {
	e.system.Root.Send(e.root, &sweepParked{quiet: &quiet})
}
