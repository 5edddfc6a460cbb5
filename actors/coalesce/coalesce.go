// Package coalesce thins a stream of reports that only the latest of
// matters (a tool call's progress): a Gate passes on at most one value per
// interval, and the latest value offered inside an interval is passed on
// when the interval ends, so a burst costs at most one value per interval
// and its last value is never lost (until the Gate is closed).
package coalesce

import (
	"sync"
	"time"
)

// Config configures a Gate. The zero value is valid.
type Config struct {
	// Interval is the least time between two values passed on. Zero or
	// less: DefaultInterval.
	Interval time.Duration
	// Now and AfterFunc are the clock; nil: package time's (which
	// testing/synctest makes virtual). AfterFunc runs f once d has passed
	// unless the returned stop is called first.
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// DefaultInterval is Config.Interval's default: four values a second.
const DefaultInterval = 250 * time.Millisecond

// Gate coalesces the values offered to it. It is safe for concurrent use.
// send is called with the Gate's lock held (so values go out in order and
// none after Close returns); it must not block, nor call the Gate.
type Gate[T any] struct {
	interval time.Duration
	now      func() time.Time
	after    func(time.Duration, func()) func() bool
	send     func(T)

	mu      sync.Mutex // guards the fields below; held while send runs
	last    time.Time  // when a value was last passed on; zero: never
	pending T          // the latest value held back, when held
	held    bool
	stop    func() bool // stops the armed flush; nil: none armed
	closed  bool
}

// New returns a Gate passing values on to send.
func New[T any](cfg Config, send func(T)) *Gate[T] {
	g := &Gate[T]{interval: cfg.Interval, now: cfg.Now, after: cfg.AfterFunc, send: send}
	if g.interval <= 0 {
		g.interval = DefaultInterval
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.after == nil {
		g.after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return g
}

// Offer passes v on at once when the last value went out at least an
// interval ago (or none has); otherwise v replaces the value held back,
// which goes out when the interval ends. After Close it does nothing.
func (g *Gate[T]) Offer(v T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	now := g.now()
	if since := now.Sub(g.last); g.last.IsZero() || since >= g.interval {
		g.sendLocked(v, now)
		return
	}
	g.pending, g.held = v, true
	if g.stop == nil {
		g.stop = g.after(g.interval-now.Sub(g.last), g.flush)
	}
}

// flush passes on the value held back, if any.
func (g *Gate[T]) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stop = nil
	if g.closed || !g.held {
		return
	}
	g.sendLocked(g.pending, g.now())
}

// sendLocked passes v on. Must be called with g.mu held.
func (g *Gate[T]) sendLocked(v T, now time.Time) {
	var zero T
	g.pending, g.held, g.last = zero, false, now
	if g.stop != nil {
		g.stop()
		g.stop = nil
	}
	g.send(v)
}

// Close drops the value held back and stops the Gate: nothing is passed
// on once Close has returned. It is idempotent.
func (g *Gate[T]) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.held = true, false
	if g.stop != nil {
		g.stop()
		g.stop = nil
	}
}
