package cluster

import (
	"sync"

	"github.com/conclave-ai/conclave/messages"
)

// tailSize is how many of a followed session's latest events a node keeps.
const tailSize = 4096

// tail keeps a followed session's latest events in a ring, so that a
// subscriber that overflowed its queue catches up from memory: reading
// the shared journal costs several JetStream round trips, and under load
// those reads would make subscribers fall further behind.
type tail struct {
	mu    sync.RWMutex
	buf   []*messages.Encoded
	start int // index of the oldest event
	n     int
}

func newTail(size int) *tail { return &tail{buf: make([]*messages.Encoded, size)} }

// add appends a batch in seq order. A batch that does not follow the last
// event (the consumer skipped a message it could not decode) starts the
// ring again, so the ring is always contiguous.
func (t *tail) add(evs []*messages.Encoded) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range evs {
		if t.n > 0 && e.Seq != t.at(t.n-1).Seq+1 {
			t.start, t.n = 0, 0
			clear(t.buf)
		}
		if t.n == len(t.buf) {
			t.buf[t.start] = nil
			t.start = (t.start + 1) % len(t.buf)
			t.n--
		}
		t.buf[(t.start+t.n)%len(t.buf)] = e
		t.n++
	}
}

func (t *tail) at(i int) *messages.Encoded { return t.buf[(t.start+i)%len(t.buf)] }

// readAfter returns up to limit events after seq `after` when the ring
// holds the event after it; ok is false when it does not (the caller
// reads the journal).
func (t *tail) readAfter(after uint64, limit int) (evs []*messages.Encoded, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.n == 0 || limit <= 0 {
		return nil, false
	}
	first := t.at(0).Seq
	if after+1 < first || after+1 > t.at(t.n-1).Seq {
		return nil, false
	}
	i := int(after + 1 - first)
	m := min(limit, t.n-i)
	out := make([]*messages.Encoded, m)
	for k := range m {
		out[k] = t.at(i + k)
	}
	return out, true
}
