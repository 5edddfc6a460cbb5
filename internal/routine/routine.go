// Package routine tracks goroutines so that every one has an owner that
// can stop accepting new work and wait for the running ones to return.
package routine

import (
	"context"
	"sync"
)

// Group starts goroutines and waits for them. The zero value is ready to use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f in a new goroutine unless the group is closed; it reports
// whether f was started.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1) // under mu, so Wait never races with a late Add
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Close refuses further Go calls. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Wait blocks until every started goroutine returned, or ctx is done.
func (g *Group) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
