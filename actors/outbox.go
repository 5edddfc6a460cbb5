package actors

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/budget"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
)

// outboxWindow is how many streamed events (model deltas and usage) of one
// run may be on their way to the journal at once. 1,024 events of 250-450
// bytes are well under a megabyte per run, and at the journal's rate
// (hundreds of thousands of events per second) a window drains in a few
// milliseconds, so it costs a streaming model nothing until the hub falls
// behind.
const outboxWindow = 1024

// StreamWindow is how many streamed events (model deltas and usage) of one
// run may be between its models and the journal at once: the bound a model
// that streams faster than the journal appends meets (backpressure).
const StreamWindow = outboxWindow

// outbox is a run's one path to its session's hub: every event of the run
// (its supervisor's, its agents', its teams' and debates', its model
// streams') goes through it. It does two things.
//
// Backpressure. A model-stream goroutine takes a credit before it sends an
// event (send, which waits, and gives up when the turn is cancelled); the
// hub gives the credit back once the event is journaled (or dropped). So at
// most outboxWindow streamed events of the run are in flight between the
// model and the journal, and a model is read only as fast as the hub
// appends. Actors do not take credits (post): an actor must never block on
// its mailbox, and each message makes it emit a bounded number of events
// (a lane's opening and closing, one per tool call), so their share of the
// hub's mailbox is bounded by the run's live agents.
//
// Budget. It counts the run's events; the first one past the budget makes
// the run supervisor end the run with run_error{code:"budget_exceeded"}
// (once). Nothing is dropped on the way: the events the run emits while it
// stops (agents' closing events, the terminal event) still go through, and
// there are only a bounded number of them.
type outbox struct {
	e       *Engine
	hub     atomic.Pointer[actor.PID] // the session's hub (replaced if it fails: sessions.go)
	credits chan struct{}             // one token per streamed event in flight
	sent    atomic.Int64
	// filesBytes adds up the sizes of the run's file events (the
	// terminal event's files_bytes).
	filesBytes atomic.Int64
	budget     int64 // <= 0: none
	// meter counts the run's model spend (token_usage) against its
	// budget and its tenant's day (package budget).
	meter *budget.Meter
	over  atomic.Bool
	// stop ends the run once a budget is exceeded, with the StopRun that
	// says which. Set before the run supervisor starts, read by any
	// goroutine that posts.
	stop atomic.Pointer[func(*messages.StopRun)]
	// overBy is the StopRun of the budget that was exceeded first.
	overBy atomic.Pointer[messages.StopRun]
	// near warns that a budget is near (once per run); set like stop.
	near atomic.Pointer[func(why string)]
	// correlation is the run's request id, put on every event the run
	// publishes (Envelope.CorrelationID); set before the run starts.
	correlation string
	// silenced: the run is falling asleep (asleep.go); its actors stop
	// without a word, and nothing more of this outbox is published.
	silenced atomic.Bool
}

// silent reports whether the run is falling asleep: its actors must stop
// without a word (nothing they post is published any more).
func (o *outbox) silent() bool { return o.silenced.Load() }

// quiet reports whether nothing more is published: the engine is frozen
// (Shutdown) or the run is falling asleep.
func (o *outbox) quiet() bool { return o.e.frozen.Load() || o.silenced.Load() }

func newOutbox(e *Engine, hub *actor.PID, limits Limits, meter *budget.Meter) *outbox {
	o := &outbox{e: e, credits: make(chan struct{}, outboxWindow), budget: limits.EventsPerRun, meter: meter}
	o.hub.Store(hub)
	return o
}

// onOver sets how the run is ended once it exceeds a budget; it runs at
// once if it already has.
func (o *outbox) onOver(stop func(*messages.StopRun)) {
	o.stop.Store(&stop)
	if by := o.overBy.Load(); by != nil {
		stop(by) // count may have missed it; a second StopRun is harmless
	}
}

// onNear sets how the run is warned that a budget is near.
func (o *outbox) onNear(warn func(why string)) { o.near.Store(&warn) }

// post sends an actor's event to the hub without waiting.
func (o *outbox) post(ctx actor.SenderContext, em *messages.Emit) {
	if o.quiet() { // a frozen engine, or a run falling asleep, publishes nothing more
		return
	}
	o.count(em)
	ctx.Send(o.hub.Load(), em)
}

// send sends a model stream's event to the hub once it has a credit. It
// returns ctx.Err() when the stream's context ends first; the event is
// then not sent.
func (o *outbox) send(ctx context.Context, root actor.SenderContext, em *messages.Emit) error {
	if o.quiet() {
		return nil
	}
	if regress.UnboundedStreams.Load() {
		o.count(em)
		root.Send(o.hub.Load(), em)
		return nil
	}
	select {
	case o.credits <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	o.count(em)
	root.Send(o.hub.Load(), &creditedEmit{Emit: *em, credit: o.credits})
	return nil
}

// count puts the run's correlation id on em, adds the event to the run's
// totals, its spend too for a token_usage, warns once when a spend budget
// is near, and stops the run the first time a total passes its budget.
// Every way of publishing calls it before the event leaves.
func (o *outbox) count(em *messages.Emit) {
	em.CorrelationID = o.correlation
	p := em.Payload
	if n := o.sent.Add(1); o.budget > 0 && n > o.budget {
		o.exceeded(budgetStop(o.budget))
	}
	if f, ok := p.(*messages.FilePayload); ok {
		o.filesBytes.Add(f.Size)
	}
	if u, ok := p.(*messages.TokenUsagePayload); ok && o.meter != nil {
		v := o.meter.Add(u.Model, u.Usage)
		if v.Spend.Unpriced == "" { // an unknown cost is not a cost of 0
			o.e.costs.add(u.Model, roleOfUsage(u, em.Lane), v.Spend.Cost)
			// Published with its estimate; the event is not on its way to
			// the hub yet (count runs before the send).
			cost := v.Spend.Cost.Dollars()
			u.CostUSD = &cost
		}
		if v.Near != "" {
			if warn := o.near.Load(); warn != nil {
				(*warn)(v.Near)
			}
		}
		if v.Over != "" {
			o.exceeded(&messages.StopRun{Code: messages.ErrCodeBudgetExceeded, Reason: v.Over})
		}
	}
}

// exceeded stops the run, the first time a budget is exceeded.
func (o *outbox) exceeded(by *messages.StopRun) {
	if !o.over.CompareAndSwap(false, true) {
		return
	}
	o.overBy.Store(by)
	if stop := o.stop.Load(); stop != nil {
		(*stop)(by)
	}
}

// afterJournaled has the hub run then (on its own goroutine) once every
// event posted so far is journaled, or refused (a hub barrier), and
// returns that hub. It returns nil, and then never runs then, when nothing
// more is published. A hub that fails for good (replaceHub) never runs
// it: the caller learns of it from the StopRun that follows, and from
// the outbox's hub no longer being the one returned.
func (o *outbox) afterJournaled(ctx actor.SenderContext, then func()) *actor.PID {
	if o.quiet() {
		return nil
	}
	hub := o.hub.Load()
	ctx.Send(hub, &hubBarrier{then: then})
	return hub
}

// FilesBytes is the total size of the files the run's agents wrote (its
// file events, from its start: a resumed run's outbox is given what its
// journal had, newOutbox).
func (o *outbox) FilesBytes() int64 { return o.filesBytes.Load() }

// Sent is how many events the run has emitted.
func (o *outbox) Sent() int64 { return o.sent.Load() }

// budgetStop is the StopRun a run gets when it exceeds its event budget.
func budgetStop(budget int64) *messages.StopRun {
	return &messages.StopRun{Code: messages.ErrCodeBudgetExceeded,
		Reason: fmt.Sprintf("the run published more than its budget of %d events (events_per_run)", budget)}
}

// postDurable sends an event to the hub and waits until the journal has
// acknowledged it (fsynced), for what must not be lost once answered: an
// approver's signature. It is called from outside the actors (an API
// request); it fails if the event was dropped, the journal failed, or
// ctx ended first.
func (o *outbox) postDurable(ctx context.Context, root actor.SenderContext, em *messages.Emit) error {
	if o.quiet() {
		return ErrShuttingDown
	}
	o.count(em)
	done := make(chan error, 1)
	root.Send(o.hub.Load(), &durableEmit{Emit: *em, done: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("actors: the event was not acknowledged by the journal in time: %w", ctx.Err())
	}
}

// postAcked sends an actor's event to the hub without waiting; the hub
// answers on done once the journal has acknowledged it (or refused it).
// An actor uses it for an event whose journaling someone outside waits
// for (an accepted abort's record).
func (o *outbox) postAcked(ctx actor.SenderContext, em *messages.Emit, done chan<- error) {
	if o.quiet() {
		done <- ErrShuttingDown
		return
	}
	o.count(em)
	ctx.Send(o.hub.Load(), &durableEmit{Emit: *em, done: done})
}

// durableEmit is an Emit whose sender waits for the journal (postDurable):
// the hub answers on done once its batch is appended, or refused.
type durableEmit struct {
	messages.Emit
	done chan<- error
}

// creditedEmit is an Emit that holds a credit of its run's outbox; the hub
// returns it once the event is journaled or dropped.
type creditedEmit struct {
	messages.Emit
	credit chan struct{}
}
