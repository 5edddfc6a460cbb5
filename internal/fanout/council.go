package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// councilRun is the council of WorkloadCouncil on the server: one run in
// the benchmark's session, started by start, then followed through the
// engine's run index (Engine.Run), which adds no subscriber to the
// session: the clients are its only ones.
type councilRun struct {
	engine *actors.Engine
	cfg    CouncilConfig
	after  uint64 // the session's head before the run: its first event is after+1

	mu      sync.Mutex // guards ref and started
	ref     actors.RunRef
	started bool
}

// RunStats is the council run's progress, as the server reports it.
type RunStats struct {
	RunID  messages.RunID     `json:"run_id"`
	Status messages.RunStatus `json:"status"`
	// Ended is true once the run's terminal event (run_finished,
	// run_error) is journaled and offered to the streams.
	Ended bool `json:"ended"`
	// LastSeq is the seq of the run's latest journaled event; Events is
	// the number of the run's events so far (every event of the session
	// after the head it started from).
	LastSeq uint64 `json:"last_seq"`
	Events  uint64 `json:"events"`
	// Seconds runs from the run_started event's timestamp to the terminal
	// event's (to the latest event's while it runs).
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// start starts the run; ErrPublishing if it was started before (a
// council runs once per server).
func (c *councilRun) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrPublishing
	}
	ref, err := c.engine.StartRun(ctx, c.cfg.startRun())
	if err != nil {
		return fmt.Errorf("fanout: start the council run: %w", err)
	}
	c.ref, c.started = ref, true
	return nil
}

// stats reads the run's summary; nil before start.
func (c *councilRun) stats() (*RunStats, error) {
	c.mu.Lock()
	ref, started := c.ref, c.started
	c.mu.Unlock()
	if !started {
		return nil, nil
	}
	sum, err := c.engine.Run(ref.Tenant, ref.RunID)
	if errors.Is(err, actors.ErrRunNotFound) { // not in the index yet: nothing journaled but run_started
		return &RunStats{RunID: ref.RunID}, nil
	}
	if err != nil {
		return nil, err
	}
	st := &RunStats{RunID: ref.RunID, Status: sum.Status, Ended: sum.Status.Terminal(), LastSeq: sum.LastSeq, Error: sum.Error}
	if sum.LastSeq > c.after {
		st.Events = sum.LastSeq - c.after
	}
	end := sum.UpdatedAt
	if sum.EndedAt != nil {
		end = *sum.EndedAt
	}
	if !sum.CreatedAt.IsZero() && end.After(sum.CreatedAt) {
		st.Seconds = end.Sub(sum.CreatedAt).Seconds()
	}
	return st, nil
}
