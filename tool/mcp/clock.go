package mcp

import "time"

// Clock is the time the servers' supervisors and stops go by: the
// backoff before a restart, how long a connection stayed up, the grace a
// stopping process gets. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// Timer returns a channel that receives once d has passed, and a func
	// that stops the timer (the channel then never receives).
	Timer(d time.Duration) (<-chan time.Time, func() bool)
}

// realClock is the default Clock: package time's (which testing/synctest
// makes virtual inside a bubble).
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Timer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
