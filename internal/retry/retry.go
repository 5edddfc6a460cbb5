// Package retry runs an operation again, with backoff, until it succeeds
// or its deadline passes: for what a process needs before it can serve
// (the cluster's stream and buckets), from servers that may be starting,
// restarting or electing a leader.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Backoff bounds: the first wait, doubled after each failure up to Max.
const (
	First = 100 * time.Millisecond
	Max   = 2 * time.Second
)

// permanent marks an error that no retry can mend.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that Until returns it at once.
func Permanent(err error) error { return permanent{err} }

// Until calls op until it returns nil, returns a Permanent error, or
// until (the deadline) passes; ctx ending stops it too. It waits First
// after the first failure, doubling up to Max, and never past until;
// each failure is logged at Info as waiting for what. Its error is op's
// last (unwrapped from Permanent), saying how long it tried.
func Until(ctx context.Context, until time.Time, log *slog.Logger, what string, op func(context.Context) error) error {
	start := time.Now()
	wait := First
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info("ready: "+what, "attempts", attempt, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.err
		}
		left := time.Until(until)
		if ctx.Err() != nil || left <= 0 {
			return fmt.Errorf("%w (%d attempts in %v)", err, attempt, time.Since(start).Round(time.Millisecond))
		}
		log.Info("waiting for "+what, "attempt", attempt, "err", err, "retry_in", min(wait, left))
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%d attempts in %v)", err, attempt, time.Since(start).Round(time.Millisecond))
		case <-t.C:
		}
		wait = min(2*wait, Max)
	}
}
