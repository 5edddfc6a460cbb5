package conclave

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

// Start validates req and starts a run in req.SessionID (a new session
// when empty), as req.Tenant (LocalTenant when empty). It returns once the
// run's start is journaled; the run goes on in the background. Follow it
// with Follow.
func (e *Engine) Start(ctx context.Context, req RunRequest) (RunRef, error) {
	return e.engine.StartRun(ctx, req)
}

// Follow yields the events of a run, from its session's first event up to
// and including the run's terminal event (RunFinished or RunError), then
// ends. Events of other runs of the session are left out. Each event
// comes exactly once, in seq order, replayed from the journal and then
// live, however slowly the loop reads: a slow reader loses nothing and
// slows no run. Breaking out of the loop is fine.
//
// An error ends the sequence: ctx's, or ErrShuttingDown when the engine
// shut down before the run ended (with KeepRunsOnShutdown), or the
// journal's. run needs RunID; without SessionID its session is looked up.
func (e *Engine) Follow(ctx context.Context, run RunRef) iter.Seq2[*Envelope, error] {
	return func(yield func(*Envelope, error) bool) {
		if run.SessionID == "" {
			sum, err := e.engine.Run(run.Tenant, run.RunID)
			if err != nil {
				yield(nil, err)
				return
			}
			run.SessionID = sum.SessionID
		}
		for env, err := range e.Events(ctx, run.Tenant, run.SessionID, 0) {
			if err != nil {
				yield(nil, err)
				return
			}
			if env.RunID != run.RunID && env.RunID != "" { // "": about the session (replay_truncated)
				continue
			}
			if !yield(env, nil) || (env.RunID == run.RunID && env.Type.Terminal()) {
				return
			}
		}
	}
}

// followBatch is how many events one read of a subscription takes.
const followBatch = 256

// Events yields every event of a session of tenant with a seq above after,
// in order and exactly once, replayed from the journal and then live. It
// does not end by itself: it ends with ctx's error, or with
// ErrShuttingDown once the engine shut down and every event was yielded.
// Breaking out of the loop is fine.
func (e *Engine) Events(ctx context.Context, tenant Tenant, session SessionID, after uint64) iter.Seq2[*Envelope, error] {
	return func(yield func(*Envelope, error) bool) {
		sub, err := e.engine.Subscribe(ctx, messages.Subscribe{Tenant: tenant, SessionID: session, After: after})
		if err != nil {
			yield(nil, err)
			return
		}
		defer sub.Close()
		var buf []*messages.Encoded
		for {
			buf, err = sub.Next(ctx, buf, followBatch)
			for _, enc := range buf {
				env, derr := enc.Envelope()
				if derr != nil {
					yield(nil, fmt.Errorf("conclave: decode event %d: %w", enc.Seq, derr))
					return
				}
				if !yield(env, nil) {
					return
				}
			}
			if err != nil {
				if errors.Is(err, feed.ErrClosed) {
					err = fmt.Errorf("%w: %w", ErrShuttingDown, err)
				}
				yield(nil, err)
				return
			}
		}
	}
}

// Run returns a run's summary: status, counts, usage, and its answer or
// error once it ended.
func (e *Engine) Run(run RunRef) (RunSummary, error) {
	return e.engine.Run(run.Tenant, run.RunID)
}

// DefaultRunsPage is the page size of Runs when the filter sets none.
const DefaultRunsPage = 50

// Runs lists a tenant's runs in the order they started, one page at a
// time (f.Limit runs, DefaultRunsPage when 0), with the cursor of the next
// page (f.After) or "" on the last page.
func (e *Engine) Runs(ctx context.Context, f RunFilter) ([]RunSummary, RunID, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultRunsPage
	}
	return e.engine.Runs(ctx, f)
}

// Abort stops a live run; it still ends with exactly one terminal event,
// run_error with code "aborted". Aborting an ended run is ErrRunTerminal.
func (e *Engine) Abort(ctx context.Context, run RunRef, reason string) error {
	return e.engine.Abort(ctx, messages.AbortRun{Tenant: run.Tenant, RunID: run.RunID, Reason: reason})
}

// Steer posts a steering note (or a graph diff) to a live run and returns
// its steering id. It is applied at the run's next wave boundary
// (steering_applied), or rejected there (steering_rejected).
func (e *Engine) Steer(ctx context.Context, run RunRef, note SteerNote) (string, error) {
	return e.engine.Steer(ctx, messages.Steer{Tenant: run.Tenant, RunID: run.RunID, SteerNote: note})
}

// Resume answers an interrupt (see InterruptRaisedPayload): the parked
// agent carries on, and the run's events show interrupt_resolved. An
// answer of the wrong shape for the interrupt's kind is an error and the
// interrupt stays open.
func (e *Engine) Resume(answer Resume) (Interrupt, error) {
	return e.engine.Resume(answer)
}

// Rewind re-runs an ended run from a wave, as a new run in the same
// session: the waves before it reuse the run's outputs, and note steers
// the waves that run again.
func (e *Engine) Rewind(ctx context.Context, run RunRef, wave int, note string) (RunRef, error) {
	return e.engine.Rewind(ctx, messages.Rewind{Tenant: run.Tenant, RunID: run.RunID, Wave: wave, Note: note})
}
