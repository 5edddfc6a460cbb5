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
	tl := newTail(4)
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
