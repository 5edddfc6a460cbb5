package transport

import "sync"

// sendQueue reports how many bytes written to a connection are still in
// the kernel: queued in the socket's send buffer or sent and not yet
// acknowledged by the peer. Queued may be called from any goroutine, also
// while another writes to the connection; after the connection is closed
// it reports false.
type sendQueue interface {
	// Queued returns the byte count, or false when the platform or the
	// connection cannot tell (then callers count those bytes as delivered).
	Queued() (int, bool)
	// PeerClosed reports, without reading anything, whether the peer
	// closed its side or the connection failed. An SSE stream has nobody
	// reading its socket, so this is how an idle one learns that its
	// client left before a heartbeat write would.
	PeerClosed() bool
}

// noSendQueue is the portable fallback: it cannot tell.
type noSendQueue struct{}

func (noSendQueue) Queued() (int, bool) { return 0, false }
func (noSendQueue) PeerClosed() bool    { return false }

var _ sendQueue = noSendQueue{}

// batchMark is one write handed to a connection: where its bytes start
// and end in the stream's byte count, and how many events it carries.
type batchMark struct {
	start, end uint64
	events     uint64
}

// maxMarks bounds the writes a flight remembers; beyond it the newest two
// are merged (a client that is far behind is counted by merged batches,
// which is exact as long as it has not started reading them).
const maxMarks = 64

// flight accounts for what a stream has handed to its connection and its
// client has not yet received: events in a write under way and bytes in
// the kernel's send queue. The writer calls begin and done around each
// write; lag may be called from any goroutine.
type flight struct {
	q sendQueue

	mu      sync.Mutex // guards the fields below
	handed  uint64     // bytes handed to writes, in total
	written uint64     // bytes the writes reported written
	marks   []batchMark
}

func newFlight(q sendQueue) *flight {
	if q == nil {
		q = noSendQueue{}
	}
	return &flight{q: q}
}

// begin records a write of size bytes carrying events events (0 for pings
// and replies) that is about to start.
func (f *flight) begin(size, events int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := f.handed
	f.handed += uint64(size)
	if events == 0 {
		return
	}
	if len(f.marks) == maxMarks {
		last := f.marks[len(f.marks)-1]
		f.marks = f.marks[:len(f.marks)-1]
		prev := &f.marks[len(f.marks)-1]
		prev.end = last.end
		prev.events += last.events
	}
	f.marks = append(f.marks, batchMark{start: start, end: f.handed, events: uint64(events)})
}

// done records that the write begun last has returned having written n bytes.
func (f *flight) done(n int) {
	f.mu.Lock()
	f.written += uint64(n)
	f.mu.Unlock()
}

// lag returns the events and bytes handed to the connection that its
// client has not acknowledged: the rest of a write under way plus the
// kernel's send queue. While a write blocks, the part of it the kernel
// already took is counted in both, so the figure can be high by at most
// that write (one batch). Without a send-queue probe, bytes the kernel
// took count as received.
// peerClosed: see sendQueue.PeerClosed.
func (f *flight) peerClosed() bool { return f.q.PeerClosed() }

func (f *flight) lag() (events, bytes uint64) {
	queued, _ := f.q.Queued()
	f.mu.Lock()
	defer f.mu.Unlock()
	bytes = min(f.handed-f.written+uint64(max(queued, 0)), f.handed)
	received := f.handed - bytes
	drop := 0
	for drop < len(f.marks) && f.marks[drop].end <= received {
		drop++
	}
	f.marks = f.marks[drop:]
	for _, m := range f.marks {
		events += m.events
	}
	if len(f.marks) > 0 && received > f.marks[0].start {
		// The oldest batch is partly received: count the rest of its
		// events in proportion to its bytes left.
		m := f.marks[0]
		left := (m.events*(m.end-received) + (m.end - m.start) - 1) / (m.end - m.start)
		events -= m.events - left
	}
	return events, bytes
}

// receivedBytes is the byte count the client has received, given the lag
// in bytes that lag just returned.
func (f *flight) receivedBytes(lagBytes uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handed - min(lagBytes, f.handed)
}
