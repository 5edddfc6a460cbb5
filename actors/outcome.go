package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
)

// outcome is how a run ends, decided exactly once by whichever comes
// first: its supervisor finishing or failing it, or a stop from outside
// (Abort, shutdown, the event budget). Whoever claims it first wins; the
// others learn the winner, so an Abort that is answered "accepted" is
// always followed by run_error{code:"aborted"}, and one that is refused
// names the end that was already decided. Claims come from the run
// supervisor and from the engine actor, hence the atomic. An accepted
// abort is journaled before it is answered (abortRecord), so the promise
// also holds across a crash.
type outcome struct{ p atomic.Pointer[decision] }

// decision is a run's end: finished (code "") or run_error{code, msg}.
type decision struct {
	code messages.ErrorCode
	msg  string
	// abort is set when the end is an accepted abort (Engine.Abort): its
	// record must be journaled before the abort is answered.
	abort *abortRecord
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

// claim decides d unless the outcome is decided already; it returns the
// decision that stands and whether it is d.
func (o *outcome) claim(d decision) (decision, bool) {
	if o.p.CompareAndSwap(nil, &d) {
		return d, true
	}
	return *o.p.Load(), false
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
