package sim

import (
	"context"
	"sync"
)

// Dispatcher runs every actor of an engine (actors.Config.Dispatcher) on
// one goroutine, one mailbox at a time, in the order the mailboxes were
// scheduled. With it, what an engine does in answer to one input is one
// chain of messages whose order depends only on the input: the
// simulation's determinism rests on it. Hold and Release let a simulation
// queue several inputs before any is handled (an abort racing a finish).
//
// Actors must never block on one another under it (the engine's never do:
// they only send).
type Dispatcher struct {
	mu     sync.Mutex
	queue  []func()
	held   bool
	closed bool
	wake   chan struct{} // cap 1: the runner has something to look at
	done   chan struct{} // closed when the runner returns
}

// NewDispatcher starts a dispatcher; stop it with Shutdown once the engine
// it runs has shut down.
func NewDispatcher() *Dispatcher {
	d := &Dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go d.loop()
	return d
}

// Schedule implements actor.Dispatcher: fn runs after everything
// scheduled before it.
func (d *Dispatcher) Schedule(fn func()) {
	d.mu.Lock()
	d.queue = append(d.queue, fn)
	d.mu.Unlock()
	d.signal()
}

// Throughput implements actor.Dispatcher: how many messages a mailbox
// handles before protoactor yields.
func (d *Dispatcher) Throughput() int { return 300 }

// Hold stops running mailboxes (what is scheduled waits) until Release.
func (d *Dispatcher) Hold() {
	d.mu.Lock()
	d.held = true
	d.mu.Unlock()
}

// Release runs the mailboxes again, those scheduled while held first.
func (d *Dispatcher) Release() {
	d.mu.Lock()
	d.held = false
	d.mu.Unlock()
	d.signal()
}

func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) loop() {
	defer close(d.done)
	for {
		d.mu.Lock()
		for (len(d.queue) == 0 || d.held) && !d.closed {
			d.mu.Unlock()
			<-d.wake
			d.mu.Lock()
		}
		if len(d.queue) == 0 { // closed, and nothing left
			d.mu.Unlock()
			return
		}
		fn := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.mu.Unlock()
		fn()
	}
}

// Shutdown runs what is queued (held or not) and stops the goroutine.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.closed, d.held = true, false
	d.mu.Unlock()
	d.signal()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
