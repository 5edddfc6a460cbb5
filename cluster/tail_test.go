package cluster

import (
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func seqs(from, to uint64) []*messages.Encoded {
	var out []*messages.Encoded
	for s := from; s <= to; s++ {
		out = append(out, messages.NewEncoded(s, messages.TextDelta, "r", []byte(`{}`)))
	}
	return out
}

func TestTail(t *testing.T) {
	tl := newTail(4 * tailCost(seqs(1, 1)[0])) // room for 4 of these
	if _, ok := tl.readAfter(0, 10); ok {
		t.Fatal("an empty tail answered")
	}
	tl.add(seqs(1, 3))
	check := func(after uint64, limit int, want ...uint64) {
		t.Helper()
		evs, ok := tl.readAfter(after, limit)
		if !ok && want != nil {
			t.Fatalf("readAfter(%d) not ok, want %v", after, want)
		}
		if ok && want == nil {
			t.Fatalf("readAfter(%d) = %d events, want not ok", after, len(evs))
		}
		for i, e := range evs {
			if e.Seq != want[i] {
				t.Fatalf("readAfter(%d)[%d] = seq %d, want %v", after, i, e.Seq, want)
			}
		}
		if len(evs) != len(want) {
			t.Fatalf("readAfter(%d) = %d events, want %v", after, len(evs), want)
		}
	}
	check(0, 10, 1, 2, 3)
	check(1, 1, 2)
	check(3, 10)       // nothing after the last: not ok (the caller asks the journal, which has nothing either)
	tl.add(seqs(4, 6)) // wraps: keeps 3..6
	check(1, 10)
	check(2, 10, 3, 4, 5, 6)
	check(4, 2, 5, 6)
	tl.add(seqs(9, 9)) // a gap restarts the ring
	check(5, 10)
	check(8, 10, 9)
}

// The tail holds events up to its bytes: many small ones, few large ones,
// and always the newest, however large.
func TestTail_SizedByBytes(t *testing.T) {
	small := func(seq uint64) *messages.Encoded {
		return messages.NewEncoded(seq, messages.TextDelta, "r", []byte(`{}`))
	}
	large := func(seq uint64) *messages.Encoded {
		return messages.NewEncoded(seq, messages.TextDelta, "r", make([]byte, 10*tailCost(small(1))))
	}
	tl := newTail(20 * tailCost(small(1)))
	for s := uint64(1); s <= 30; s++ {
		tl.add([]*messages.Encoded{small(s)})
	}
	if _, ok := tl.readAfter(10, 100); !ok {
		t.Fatal("the last 20 small events are not held")
	}
	if _, ok := tl.readAfter(9, 100); ok {
		t.Fatal("more than 20 small events are held")
	}
	tl.add([]*messages.Encoded{large(31)}) // costs 10 small ones and more
	if _, ok := tl.readAfter(20, 100); ok {
		t.Fatal("a large event did not push out small ones")
	}
	if evs, ok := tl.readAfter(21, 100); !ok || len(evs) != 10 || evs[9].Seq != 31 {
		t.Fatalf("after the large event: %d events, ok %v; want 22..31", len(evs), ok)
	}
	huge := messages.NewEncoded(32, messages.TextDelta, "r", make([]byte, 100*tailCost(small(1))))
	tl.add([]*messages.Encoded{huge})
	if evs, ok := tl.readAfter(31, 100); !ok || len(evs) != 1 || evs[0].Seq != 32 {
		t.Fatalf("an event larger than the tail is not held alone: %d events, ok %v", len(evs), ok)
	}
}
