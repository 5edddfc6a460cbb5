package sim

import (
	"context"
	"slices"
	"sync"
)

// Scheduler holds the simulation's gates: the points where a model stream,
// a tool call or anything else of a simulated world waits for the driver
// to let it go on. A gate is named by a key that depends only on what it
// is (a run, an agent, a turn, a chunk), never on when it was reached, so
// that the driver, picking among the sorted keys of the gates waiting once
// the system is quiet, takes the same decisions for the same seed.
//
// Models and tools of your own join the simulation by waiting on a gate
// (Gate) before each thing they do; Model and Tool wrap them so.
type Scheduler struct {
	mu      sync.Mutex
	gates   map[string]chan struct{}
	arrived chan struct{} // cap 1: a gate was reached since the driver last looked
}

// NewScheduler returns a scheduler without gates.
func NewScheduler() *Scheduler {
	return &Scheduler{gates: map[string]chan struct{}{}, arrived: make(chan struct{}, 1)}
}

// Gate waits until the driver releases key, or ctx ends (its error is
// returned). Two gates of the same key must not wait at once: a key names
// one thing.
func (s *Scheduler) Gate(ctx context.Context, key string) error {
	ch := make(chan struct{})
	s.mu.Lock()
	if _, dup := s.gates[key]; dup {
		s.mu.Unlock()
		panic("sim: two gates wait under one key: " + key)
	}
	s.gates[key] = ch
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.gates[key] == ch {
			delete(s.gates, key)
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// Pending lists the keys of the gates waiting, sorted.
func (s *Scheduler) Pending() []string {
	s.mu.Lock()
	keys := make([]string, 0, len(s.gates))
	for k := range s.gates {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	return keys
}

// Release lets the gate of key go on; false if no gate waits under key.
func (s *Scheduler) Release(key string) bool {
	s.mu.Lock()
	ch, ok := s.gates[key]
	delete(s.gates, key)
	s.mu.Unlock()
	if ok {
		close(ch)
	}
	return ok
}

// Arrived is signalled when a gate is reached (level-triggered, one slot).
func (s *Scheduler) Arrived() <-chan struct{} { return s.arrived }
