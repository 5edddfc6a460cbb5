package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
)

// Ending a failing graph (a run's or a team's). Once it fails, for
// whatever reason (a node failed, delegation_limit, the event budget, an
// abort, a shutdown), every node that never ran closes as node_skipped
// before the terminal event: tens of thousands of them in a large plan.
// maybeEndFailure emits them in batches of endingBatch, with at most
// endingInFlight batches on their way to the journal at once (a hub
// barrier after each says when the journal has it), so that
//
//   - each skipped node costs the same few steps whatever the plan's size
//     (the failed node's dependents are found once: ending.downstream);
//   - the supervisor reads its mailbox between batches: an abort (which
//     takes the failure's place, outcome.go) or a shutdown does not wait
//     for the whole ending;
//   - the session's hub holds at most endingInFlight batches of the
//     ending at a time, and other runs of the session are not held up
//     behind all of it.
//
// In this order: the current wave's queued nodes (at once, even while
// agents are still stopping), then, once the last agent has stopped, the
// current wave's nodes that never started (a run recovery put back), the
// wave's wave_completed, the rest of the plan, and the terminal event.

// endingBatch is how many node_skipped make one batch of an ending: one
// hub batch (maxHubBatch).
const endingBatch = maxHubBatch

// endingInFlight is how many batches may be on their way to the journal
// at once: two, so that the journal appends one while the supervisor
// emits the next (with one, the 100,000-node ending of
// BenchmarkFailedRunEnding on the durable journal took 3.3 s instead of
// 2.5 s, run back to back).
const endingInFlight = 2

// ending is a failing graph's progress towards its terminal event.
type ending struct {
	pace pacer      // the node_skipped batches on their way to the journal
	hub  *actor.PID // the hub they were sent to
	// wavePos and planPos: how far the scans of the current wave's nodes
	// and of the plan's have gone.
	wavePos, planPos int
	// down is dag.Downstream of the node downOf (the node whose failure
	// fails the graph), computed once: per skipped node it cost a walk
	// of the whole plan (issue 27: 37 node_skipped per second in a
	// 100,000-node plan).
	downOf string
	down   map[string]bool
}

// pacer paces a stream of events to the journal: batches of size events,
// each acknowledged once the journal has it, and at most window batches
// not acknowledged at once. The sender calls next before each event; when
// it returns close, the sender asks for the full batch's acknowledgment
// (ack is called when it comes) and calls closed, which says whether to
// wait for an ack before the event. So at most size*window events are
// unacknowledged, and the sender never waits while fewer are.
type pacer struct {
	size, window int
	n            int // events of the current batch
	inFlight     int // batches closed and not acknowledged
	waiting      bool
}

func newPacer(size, window int) pacer { return pacer{size: size, window: window} }

// next reports whether the current batch is full: it must be closed before
// one more event. Otherwise it counts the event.
func (p *pacer) next() (close bool) {
	if p.n == p.size {
		return true
	}
	p.n++
	return false
}

// closed closes the full batch (its acknowledgment asked for) and reports
// whether the sender must wait for an ack before its next event; if not,
// that event is counted in the new batch.
func (p *pacer) closed() (wait bool) {
	p.n, p.inFlight = 0, p.inFlight+1
	if p.inFlight >= p.window {
		p.waiting = true
		return true
	}
	p.n = 1
	return false
}

// unpaced starts a new batch without asking for an acknowledgment (the
// sender cannot wait for one), the next event counted in it.
func (p *pacer) unpaced() { p.n = 1 }

// ack is a closed batch's acknowledgment; it reports whether the sender
// was waiting for it and goes on now. One that comes when no batch is in
// flight (a batch of a hub given up, endingHubLost) is ignored.
func (p *pacer) ack() (resume bool) {
	if p.inFlight == 0 {
		return false
	}
	p.inFlight--
	if !p.waiting {
		return false
	}
	p.waiting = false
	return true
}

// endingStep is what the hub's barrier sends the supervisor once the
// journal has a batch of the ending.
type endingStep struct{}

// IgnoreDeadLetterLogging: the supervisor may have stopped (frozen by a
// shutdown) before the journal had the batch.
func (endingStep) IgnoreDeadLetterLogging() {}

// downstream is dag.Downstream(p, of), computed once per node of.
func (e *ending) downstream(p messages.Plan, of string) map[string]bool {
	if e.down == nil || e.downOf != of {
		e.down, e.downOf = dag.Downstream(p, of), of
	}
	return e.down
}

// endingFull reports whether the supervisor must wait before it skips
// one more node. Each full batch asks the hub for an endingStep once the
// journal has it; the supervisor waits for the first of them when
// endingInFlight batches are on their way. A team its
// parent is stopping cannot wait (no message reaches a stopping actor),
// nor can a run whose events are no longer published (frozen, falling
// asleep): they go on at once.
func (r *runActor) endingFull(ctx actor.Context) bool {
	p := &r.end.pace
	if !p.next() {
		return false
	}
	if r.team != nil && r.team.stopped {
		p.unpaced()
		return false
	}
	root, self := r.e.system.Root, ctx.Self()
	hub := r.spec.out.afterJournaled(ctx, func() { root.Send(self, &endingStep{}) })
	if hub == nil {
		p.unpaced()
		return false
	}
	r.end.hub = hub
	return p.closed()
}

// endingHubLost: a StopRun came while the ending's batches were on their
// way to a hub that is no longer the session's (it failed for good, and
// replaceHub stops the run): their barriers will never answer, so the
// ending goes on, to the new hub.
func (r *runActor) endingHubLost(ctx actor.Context) {
	if r.end.pace.inFlight == 0 || r.end.hub == r.spec.out.hub.Load() {
		return
	}
	r.end.pace = newPacer(r.end.pace.size, r.end.pace.window)
	r.maybeEndFailure(ctx)
}

// maybeEndFailure goes on ending a failing graph (see above); it returns
// while a batch is on its way to the journal or agents are still
// stopping, and is called again when they are done.
func (r *runActor) maybeEndFailure(ctx actor.Context) {
	if r.terminal != nil || r.end.pace.waiting {
		return
	}
	for len(r.graph.queue) > 0 {
		if r.endingFull(ctx) {
			return
		}
		id := r.graph.queue[0]
		r.graph.queue = r.graph.queue[1:]
		r.graph.skipFailed(ctx, id)
	}
	if len(r.agents.byPID) > 0 {
		return
	}
	r.steering.dropSteering(ctx, "the run ended before the next wave boundary")
	if r.g != nil {
		if r.g.InWave() {
			// The wave's nodes that never started close before the wave
			// does (a run failing when recovery put it back, endRestored,
			// still has them: found by testkit/sim, seed 61502).
			wave := r.g.Waves[r.g.Wave]
			for ; r.end.wavePos < len(wave); r.end.wavePos++ {
				if id := wave[r.end.wavePos]; r.node(id).State == runstate.Pending {
					if r.endingFull(ctx) {
						return
					}
					r.graph.skipFailed(ctx, id)
				}
			}
			r.graph.completeWave(ctx)
		}
		nodes := r.g.Plan.Nodes
		for ; r.end.planPos < len(nodes); r.end.planPos++ {
			if id := nodes[r.end.planPos].ID; r.node(id).State == runstate.Pending {
				if r.endingFull(ctx) {
					return
				}
				r.graph.skipFailed(ctx, id)
			}
		}
	}
	r.finish(ctx, &messages.RunErrorPayload{Code: r.failCode, Message: r.failMsg})
}

// endingStepped: the journal has a batch of the ending.
func (r *runActor) endingStepped(ctx actor.Context) {
	if r.end.pace.ack() {
		r.maybeEndFailure(ctx)
	}
}

// skipFailed skips a node that never ran because the graph is ending.
func (w *graphRunner) skipFailed(ctx actor.Context, id string) {
	r := w.r
	dep, reason := w.incompleteDep(id), "run ended before the node started: "+r.failMsg
	if dep != "" {
		reason = "dependency " + dep + " did not complete"
	} else if r.failDep != "" && r.end.downstream(r.g.Plan, r.failDep)[id] {
		dep = r.failDep
	}
	w.skip(ctx, id, reason, dep)
}

// adoptAbort: an abort took the place of the failure the run is ending
// (outcome.claim); the run now ends as aborted, its record journaled
// first (claimEnd).
func (r *runActor) adoptAbort(ctx actor.Context) {
	if r.team != nil || r.terminal != nil {
		return
	}
	if d, ok := r.spec.outcome.decided(); ok && d.abort != nil && !d.abort.posted.Load() {
		r.failCode, r.failMsg = r.claimEnd(ctx, d.code, d.msg)
	}
}
