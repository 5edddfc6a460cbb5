// Package feed is the consumer side of a session: a Subscription delivers
// every event after a cursor exactly once and in seq order, first from the
// journal (replay), then live from the hub, with no gap and no duplicate.
//
// The hub never blocks on a subscriber. It offers each flushed batch to the
// subscriber's bounded queue; when the queue is full the offer is dropped and
// the subscriber later notices the hole (the next queued seq is not cursor+1,
// or the queue is empty while the hub's head is past the cursor) and reads the
// missing events from the journal. Replay, live delivery and catch-up after
// overflow are therefore one mechanism, driven only by seq:
//
//	deliver queue[0] if it is cursor+1
//	drop queue[0]    if it is <= cursor (already read from the journal)
//	read the journal if queue[0] > cursor+1, or the queue is empty and head > cursor
//	otherwise wait for the hub's next offer
//
// Because the head is published only after the journal acknowledged the
// events, a journal read for seqs <= head always finds them.
package feed

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/conclave-ai/conclave/messages"
)

// ErrClosed is returned by Next once the subscription is closed and every
// event up to the head at close time has been delivered.
var ErrClosed = errors.New("feed: subscription closed")

// Source is where a subscription catches up from. The session hub provides it.
type Source interface {
	// Head is the last seq the journal acknowledged. It only grows.
	Head() uint64
	// ReadAfter reads acknowledged events with seq > after, in order.
	ReadAfter(ctx context.Context, after uint64, limit int) ([]*messages.Encoded, error)
}

// DefaultQueue is the default bound of a subscriber's live queue.
const DefaultQueue = 256

// Subscription is one consumer's view of a session. Offer and Close may be
// called from any goroutine; Next must be called from one goroutine at a time.
type Subscription struct {
	src Source

	mu       sync.Mutex // guards the fields below
	buf      []*messages.Encoded
	start, n int // ring buffer of queued events: buf[start], ... (n of them)
	size     int
	closed   bool
	closeErr error

	// notify has capacity 1 so an offer made while the consumer is not
	// waiting is remembered, and the hub never blocks on it.
	notify chan struct{}

	cursor  atomic.Uint64 // last seq delivered by Next; written only by Next
	dropped atomic.Uint64 // events the hub could not queue (read from the journal instead)
	onReady atomic.Pointer[func()]
}

// New returns a subscription that delivers every event with seq > after.
// queue bounds the live queue (DefaultQueue when <= 0); its memory is
// allocated on the first offer so idle subscribers stay small.
func New(src Source, after uint64, queue int) *Subscription {
	if queue <= 0 {
		queue = DefaultQueue
	}
	s := &Subscription{src: src, size: queue, notify: make(chan struct{}, 1)}
	s.cursor.Store(after)
	return s
}

// Cursor is the last seq delivered.
func (s *Subscription) Cursor() uint64 { return s.cursor.Load() }

// Lag is how many acknowledged events the consumer has not read yet.
func (s *Subscription) Lag() uint64 {
	if h, c := s.src.Head(), s.cursor.Load(); h > c {
		return h - c
	}
	return 0
}

// Dropped counts events that did not fit the live queue and were (or will
// be) read from the journal instead. Nothing is lost either way.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Offer queues events for delivery without ever blocking. Events must be in
// seq order. It is called by the hub after the journal acknowledged them.
func (s *Subscription) Offer(events []*messages.Encoded) {
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.buf == nil {
		s.buf = make([]*messages.Encoded, s.size)
	}
	cursor := s.cursor.Load()
	for i, e := range events {
		if e.Seq <= cursor {
			continue // the consumer already read it from the journal
		}
		if s.n == s.size {
			s.dropped.Add(uint64(len(events) - i))
			break
		}
		s.buf[(s.start+s.n)%s.size] = e
		s.n++
	}
	s.mu.Unlock()
	s.wake()
}

// Attached must be called by the hub once it has registered the
// subscription for offers. A consumer that caught up from the journal before
// the registration may be waiting for an offer; if no event follows, this
// wake-up is what makes it read the events published in between.
func (s *Subscription) Attached() { s.wake() }

func (s *Subscription) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
	if fn := s.onReady.Load(); fn != nil {
		(*fn)()
	}
}

// OnReady registers fn, called whenever events may have become available or
// the subscription was closed, for consumers that Poll instead of waiting in
// Next (so an idle consumer needs no goroutine). fn runs on the hub's
// goroutine and must not block. It may be called when Poll then finds
// nothing.
func (s *Subscription) OnReady(fn func()) { s.onReady.Store(&fn) }

// Poll is Next without waiting: it returns what is available now, possibly
// nothing (with a nil error).
func (s *Subscription) Poll(ctx context.Context, dst []*messages.Encoded, max int) ([]*messages.Encoded, error) {
	return s.next(ctx, dst, max, false)
}

// Close ends the subscription. Next delivers what is left up to the head,
// then returns err (ErrClosed when err is nil). Close is idempotent; the
// first call wins and is the only one that reports true.
func (s *Subscription) Close(err error) bool {
	if err == nil {
		err = ErrClosed
	}
	s.mu.Lock()
	first := !s.closed
	if first {
		s.closed, s.closeErr = true, err
	}
	s.mu.Unlock()
	s.wake()
	return first
}

// Next appends to dst[:0] the next events after the cursor, at most max of
// them (max <= 0 means 256), waiting until at least one is available. The
// events are contiguous: the first has seq Cursor()+1. It returns ctx.Err()
// when ctx is done, and the close error once the subscription is closed and
// drained.
func (s *Subscription) Next(ctx context.Context, dst []*messages.Encoded, max int) ([]*messages.Encoded, error) {
	return s.next(ctx, dst, max, true)
}

func (s *Subscription) next(ctx context.Context, dst []*messages.Encoded, max int, wait bool) ([]*messages.Encoded, error) {
	if max <= 0 {
		max = 256
	}
	dst = dst[:0]
	for {
		cursor := s.cursor.Load()
		s.mu.Lock()
		for s.n > 0 && s.buf[s.start].Seq <= cursor { // already delivered from the journal
			s.pop()
		}
		if s.n > 0 && s.buf[s.start].Seq == cursor+1 {
			for s.n > 0 && len(dst) < max && s.buf[s.start].Seq == cursor+1 {
				cursor++
				dst = append(dst, s.pop())
			}
			s.mu.Unlock()
			s.cursor.Store(cursor)
			return dst, nil
		}
		// Hole: events between the cursor and the queue (or the head) are
		// only in the journal.
		upto := s.src.Head()
		if s.n > 0 {
			upto = s.buf[s.start].Seq - 1
		}
		closed, closeErr := s.closed, s.closeErr
		s.mu.Unlock()

		if upto > cursor {
			evs, err := s.src.ReadAfter(ctx, cursor, int(min(uint64(max), upto-cursor)))
			if err != nil {
				return dst, err
			}
			if len(evs) > 0 {
				// A jump is only allowed behind an explicit replay_truncated
				// (retention removed the events in between).
				if evs[0].Seq != cursor+1 && evs[0].Type != messages.ReplayTruncated {
					return dst, &GapError{After: cursor, Got: evs[0].Seq}
				}
				dst = append(dst, evs...)
				s.cursor.Store(evs[len(evs)-1].Seq)
				return dst, nil
			}
		}
		if closed {
			return dst, closeErr
		}
		if !wait {
			return dst, nil
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// pop removes the oldest queued event. Must be called with s.mu held.
func (s *Subscription) pop() *messages.Encoded {
	e := s.buf[s.start]
	s.buf[s.start] = nil
	s.start = (s.start + 1) % s.size
	s.n--
	return e
}

// GapError reports that the journal no longer holds the events right after
// the cursor and the source did not say so with a replay_truncated event.
type GapError struct {
	After uint64 // the cursor
	Got   uint64 // the first seq the journal still has
}

func (e *GapError) Error() string {
	return "feed: journal has no events between the cursor and its first retained event"
}
