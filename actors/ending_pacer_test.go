package actors

import "testing"

// TestPacer_Window sends 100 events through a pacer of batches of 3, at
// most 2 unacknowledged, with a journal that acknowledges a batch only
// when the sender waits (the slowest journal): the sender must never have
// more than 6 events unacknowledged, must wait only when it has 6, and
// every event must be sent.
func TestPacer_Window(t *testing.T) {
	t.Parallel()
	const size, window, events = 3, 2, 100
	p := newPacer(size, window)
	var asked []int // events in each batch closed and not acknowledged, oldest first
	cur := 0        // events of the batch being filled
	unacked := func() int {
		n := cur
		for _, b := range asked {
			n += b
		}
		return n
	}
	waits := 0
	for sent := 0; sent < events; {
		if p.next() {
			asked, cur = append(asked, cur), 0
			if p.closed() {
				waits++
				if u := unacked(); u != size*window {
					t.Fatalf("event %d: waits with %d events unacknowledged, want %d", sent, u, size*window)
				}
				asked = asked[1:] // the oldest batch is journaled
				if !p.ack() {
					t.Fatalf("event %d: the ack it waited for does not resume it", sent)
				}
				if p.next() { // resumed, it asks again: the event goes in the new batch
					t.Fatalf("event %d: a new batch is full", sent)
				}
			}
		}
		cur++
		sent++
		if u := unacked(); u > size*window {
			t.Fatalf("event %d: %d events unacknowledged, more than %d", sent, u, size*window)
		}
	}
	if want := (events - size*window + size - 1) / size; waits < want-1 || waits > want+1 {
		t.Fatalf("%d waits for %d events, want about %d", waits, events, want)
	}
	for range asked { // the rest are acknowledged; nobody waits for them
		if p.ack() {
			t.Fatal("an ack resumed a sender that was not waiting")
		}
	}
}

// TestPacer_FastJournal: a journal that acknowledges each batch before
// the next one is full never makes the sender wait.
func TestPacer_FastJournal(t *testing.T) {
	t.Parallel()
	p := newPacer(4, 2)
	for i := range 1000 {
		if p.next() {
			if p.closed() {
				t.Fatalf("event %d: waits though every batch was acknowledged", i)
			}
			if p.ack() {
				t.Fatalf("event %d: an ack resumed a sender that was not waiting", i)
			}
		}
	}
}

// TestPacer_Unpaced: a sender that cannot wait starts batches without
// closing them: nothing is in flight and it never waits.
func TestPacer_Unpaced(t *testing.T) {
	t.Parallel()
	p := newPacer(2, 1)
	for i := range 10 {
		if p.next() {
			p.unpaced()
		}
		if p.inFlight != 0 || p.waiting {
			t.Fatalf("event %d: %d in flight, waiting %v", i, p.inFlight, p.waiting)
		}
	}
}
