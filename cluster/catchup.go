package cluster

import (
	"context"
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// catchup shares the journal reads of a followed session's subscribers
// that fell behind its tail: one journal read at a time per session, and
// the events read are kept in a window (a tail of their own, bounded by
// bytes) from which every other lagging subscriber reads. Subscribers that
// fell behind together read each chunk of the journal once between them,
// not once each: the reads always extend the window (a cursor inside it is
// served from memory), until a subscriber behind the window's start
// starts it again.
type catchup struct {
	window *tail

	mu       sync.Mutex
	inflight chan struct{} // closed when the read under way ends; nil: none
}

func newCatchup(maxBytes int) *catchup { return &catchup{window: newTail(maxBytes)} }

// read returns up to limit events after seq `after`: from the window, or
// by read (the journal), once no other read is under way. Only events
// that follow `after` contiguously are kept in the window (never a
// replay_truncated notice, whose seq is not an event's).
func (c *catchup) read(ctx context.Context, after uint64, limit int,
	read func(context.Context, uint64, int) ([]*messages.Encoded, error)) ([]*messages.Encoded, error) {
	for {
		if evs, ok := c.window.readAfter(after, limit); ok {
			return evs, nil
		}
		c.mu.Lock()
		if wait := c.inflight; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait: // look at the window again
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.inflight = done
		c.mu.Unlock()
		evs, err := read(ctx, after, limit)
		if err == nil && len(evs) > 0 && evs[0].Seq == after+1 && evs[0].Type != messages.ReplayTruncated {
			c.window.add(evs)
		}
		c.mu.Lock()
		c.inflight = nil
		close(done)
		c.mu.Unlock()
		return evs, err
	}
}
