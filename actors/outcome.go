package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
)

// outcome is how a run ends, decided by whichever comes first: its
// supervisor finishing or failing it, or a stop from outside (Abort,
// shutdown, the event budget). Whoever claims it first wins; the others
// learn the winner, so an Abort that is answered "accepted" is always
// followed by run_error{code:"aborted"}, and one that is refused names the
// end that was already decided. One exception: a failure is not final
// while the run is still ending it (stopping its agents, skipping the
// nodes that never ran, which takes a while in a large plan), so an abort
// that comes meanwhile takes its place; the supervisor seals the outcome
// just before it emits the terminal event, and from then on nothing takes
// its place. Claims come from the run supervisor and from the engine
// actor, hence the atomic. An accepted abort is journaled before it is
// answered (abortRecord), so the promise also holds across a crash.
type outcome struct{ p atomic.Pointer[decision] }

// decision is a run's end: finished (code "") or run_error{code, msg}.
type decision struct {
	code messages.ErrorCode
	msg  string
	// abort is set when the end is an accepted abort (Engine.Abort): its
	// record must be journaled before the abort is answered.
	abort *abortRecord
	// sealed: the terminal event is being emitted with this end; an
	// abort can no longer take its place.
	sealed bool
}

// yieldsTo reports whether an abort claimed now takes d's place: d is a
// failure the run is still ending.
func (d *decision) yieldsTo(next decision) bool {
	return next.abort != nil && d.code != "" && d.code != messages.ErrCodeAborted && d.abort == nil && !d.sealed
}

// abortRecord is an accepted abort's record in the journal
// (run_abort_requested), which makes the abort outlive a restart: recovery
// ends a run that has one as aborted. Whoever first acts on the decision
// posts it, once, before the run's terminal event (the run supervisor, in
// claimEnd; the engine, if the supervisor died first); Engine.Abort
// answers once the journal has acknowledged it, on ack.
type abortRecord struct {
	reason string
	posted atomic.Bool
	ack    chan error // buffered: the hub never waits on it
}

func newAbortRecord(reason string) *abortRecord {
	return &abortRecord{reason: reason, ack: make(chan error, 1)}
}

// post journals the record through the run's outbox unless it was posted
// already, and reports whether it posted it now.
func (a *abortRecord) post(ctx actor.SenderContext, spec *runSpec) bool {
	if a == nil || !a.posted.CompareAndSwap(false, true) {
		return false
	}
	spec.out.postAcked(ctx, &messages.Emit{RunID: spec.runID, AgentID: supervisorAgentID, Lane: messages.RunLane(),
		Payload: &messages.RunAbortRequestedPayload{Reason: a.reason}}, a.ack)
	return true
}

// claim decides d unless the outcome is decided already (an abort also
// replaces a failure that is not sealed); it returns the decision that
// stands and whether it is d.
func (o *outcome) claim(d decision) (decision, bool) {
	for {
		cur := o.p.Load()
		if cur != nil && !cur.yieldsTo(d) {
			return *cur, false
		}
		if o.p.CompareAndSwap(cur, &d) {
			return d, true
		}
	}
}

// seal makes the decision final and returns it: the run emits its
// terminal event with it, and no abort takes its place any more. It
// returns false when nothing was decided (a team's outcome, say).
func (o *outcome) seal() (decision, bool) {
	for {
		cur := o.p.Load()
		if cur == nil {
			return decision{}, false
		}
		if cur.sealed {
			return *cur, true
		}
		s := *cur
		s.sealed = true
		if o.p.CompareAndSwap(cur, &s) {
			return s, true
		}
	}
}

// decided returns the decision, if any.
func (o *outcome) decided() (decision, bool) {
	if d := o.p.Load(); d != nil {
		return *d, true
	}
	return decision{}, false
}

// String describes a decision for error messages.
func (d decision) String() string {
	if d.code == "" {
		return "finished"
	}
	return "ending with " + string(d.code)
}
