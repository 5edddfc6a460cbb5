package cluster

import (
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// DefaultTailBytes is how much of a followed session's latest events a
// node keeps by default (FollowersOptions.TailBytes): 4 MiB, some 10,000
// streamed tokens, per followed session (it was 4,096 events of any
// size). Sized by bytes, not events, so that memory is bounded whatever
// the events' size: many small ones (tokens) or few large ones (tool
// results). A burst longer than that is caught up from JetStream; raise
// it (--cluster-tail-bytes) where memory allows.
const DefaultTailBytes = 4 << 20

// eventOverhead is what an event costs the tail beyond its JSON (the
// Encoded struct, its slot, the SSE frame header).
const eventOverhead = 96

// tailCost is what e costs the tail.
func tailCost(e *messages.Encoded) int { return len(e.JSON) + eventOverhead }

// tail keeps a followed session's latest events, up to maxBytes of them
// (tailCost; the newest event is kept whatever its size), so that a
// subscriber that overflowed its queue catches up from memory: reading
// the shared journal costs several JetStream round trips, and under load
// those reads would make subscribers fall further behind.
type tail struct {
	mu       sync.RWMutex
	maxBytes int
	evs      []*messages.Encoded // evs[start:] are held, contiguous seqs, oldest first
	start    int
	bytes    int // of evs[start:]
}

func newTail(maxBytes int) *tail { return &tail{maxBytes: maxBytes} }

// add appends a batch in seq order. A batch that does not follow the last
// event (the consumer skipped a message it could not decode) starts the
// tail again, so it is always contiguous.
func (t *tail) add(evs []*messages.Encoded) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range evs {
		if n := len(t.evs); n > t.start && e.Seq != t.evs[n-1].Seq+1 {
			clear(t.evs)
			t.evs, t.start, t.bytes = t.evs[:0], 0, 0
		}
		t.evs = append(t.evs, e)
		t.bytes += tailCost(e)
		for t.bytes > t.maxBytes && len(t.evs)-t.start > 1 {
			t.bytes -= tailCost(t.evs[t.start])
			t.evs[t.start] = nil
			t.start++
		}
	}
	// Compact once the dropped slots are half the slice: amortised O(1)
	// per event, and the slice stays at most twice what is held.
	if t.start > 0 && t.start >= len(t.evs)/2 {
		n := copy(t.evs, t.evs[t.start:])
		clear(t.evs[n:])
		t.evs, t.start = t.evs[:n], 0
	}
}

// readAfter returns up to limit events after seq `after` when the tail
// holds the event after it; ok is false when it does not (the caller
// reads the journal).
func (t *tail) readAfter(after uint64, limit int) (evs []*messages.Encoded, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	held := t.evs[t.start:]
	if len(held) == 0 || limit <= 0 {
		return nil, false
	}
	first := held[0].Seq
	if after+1 < first || after+1 > held[len(held)-1].Seq {
		return nil, false
	}
	i := int(after + 1 - first)
	return append([]*messages.Encoded(nil), held[i:i+min(limit, len(held)-i)]...), true
}
