package actors

import (
	"sync/atomic"

	"github.com/conclave-ai/conclave/messages"
)

// outcome is how a run ends, decided exactly once by whichever comes
// first: its supervisor finishing or failing it, or a stop from outside
// (Abort, shutdown, the event budget). Whoever claims it first wins; the
// others learn the winner, so an Abort that is answered "accepted" is
// always followed by run_error{code:"aborted"}, and one that is refused
// names the end that was already decided. Claims come from the run
// supervisor and from the engine actor, hence the atomic.
type outcome struct{ p atomic.Pointer[decision] }

// decision is a run's end: finished (code "") or run_error{code, msg}.
type decision struct {
	code messages.ErrorCode
	msg  string
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
