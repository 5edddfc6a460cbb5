package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// The shared journal of the cluster simulation passes the conformance
// suite journal.JetStream passes (and its reopen half: a new handle on
// the same store stands for a reopened stream).
func TestFencedJournal_Conformance(t *testing.T) {
	testkit.RunJournalSuite(t, func(*testing.T) journal.Journal { return newFencedStore().handle("n1") })
}

func TestFencedJournal_ReopenConformance(t *testing.T) {
	stores := map[string]*fencedStore{}
	testkit.RunDurableJournalSuite(t, func(_ *testing.T, dir string) journal.Journal {
		s := stores[dir]
		if s == nil {
			s = newFencedStore()
			stores[dir] = s
		}
		return s.handle("n1")
	})
}

func fencedEvents(seqs ...uint64) []*messages.Encoded {
	out := make([]*messages.Encoded, len(seqs))
	for i, seq := range seqs {
		out[i] = messages.NewEncoded(seq, messages.TextDelta, "r", fmt.Appendf(nil, `{"n":%d}`, seq))
	}
	return out
}

// TestFencedJournal_Append is journal.JetStream's TestJetStream_FencesAStaleWriter
// on the simulated store: a writer whose view is stale is refused, a
// fence refuses the writer before it, and the store names no interleaving.
func TestFencedJournal_Append(t *testing.T) {
	ctx := context.Background()
	st := newFencedStore()
	a, b := st.handle("a"), st.handle("b")
	if err := a.Append(ctx, "s", fencedEvents(1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, "s", fencedEvents(2)); err != nil { // b reads the tail: no view yet
		t.Fatal(err)
	}
	if err := a.Append(ctx, "s", fencedEvents(3)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("stale Append = %v, want ErrFenced", err)
	}
	if err := b.Append(ctx, "s", fencedEvents(3)); err != nil {
		t.Fatal(err)
	}
	if h, err := a.Fence(ctx, "s"); err != nil || h != 3 {
		t.Fatalf("Fence = %d, %v; want 3", h, err)
	}
	if err := b.Append(ctx, "s", fencedEvents(4)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("Append after a fence = %v, want ErrFenced", err)
	}
	if err := a.Append(ctx, "s", fencedEvents(4)); err != nil {
		t.Fatal(err)
	}
	if evs, err := b.ReadAfter(ctx, "s", 2, 10); err != nil || len(evs) != 2 || evs[0].Seq != 3 || evs[1].Seq != 4 {
		t.Fatalf("ReadAfter across the fence = %v, %v", evs, err)
	}
	// a wrote, then b (reading the tail afresh), then a fenced b off: one
	// writer at a time, though a wrote twice.
	if got := st.interleaved(); got != nil {
		t.Fatalf("interleaved = %v", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Head(ctx, "s"); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Head after Close = %v, want ErrClosed", err)
	}
	if h, err := a.Head(ctx, "s"); err != nil || h != 4 { // the store is the other nodes'
		t.Fatalf("another handle's Head after Close = %d, %v", h, err)
	}
}

// TestFencedStore_Interleaved: without the fence check (regress.NoFencing),
// a stale owner's append lands after the new owner's fence, and the
// one-writer check names it.
func TestFencedStore_Interleaved(t *testing.T) {
	ctx := context.Background()
	regress.NoFencing.Store(true)
	defer regress.NoFencing.Store(false)
	st := newFencedStore()
	a, b := st.handle("a"), st.handle("b")
	if err := a.Append(ctx, "s", fencedEvents(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Fence(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "s", fencedEvents(2)); err != nil {
		t.Fatalf("Append without the fence check = %v", err)
	}
	got := st.interleaved()
	if len(got) != 1 || !strings.Contains(got[0], "node a appended seqs 2..2 after node b took it over at seq 1") {
		t.Fatalf("interleaved = %q", got)
	}
}

// TestFencedJournal_Tail: a tail gets every batch any handle appends after
// it started, in order and as copies; a refused batch never; nothing
// after stop.
func TestFencedJournal_Tail(t *testing.T) {
	ctx := context.Background()
	st := newFencedStore()
	a, b := st.handle("a"), st.handle("b")
	if err := a.Append(ctx, "s", fencedEvents(1)); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	head, stop, err := b.Tail(ctx, "s", func(evs []*messages.Encoded) {
		for _, e := range evs {
			got = append(got, e.Seq)
		}
		evs[0] = nil // the tail owns its slice: the appender's is not touched
	})
	if err != nil || head != 1 {
		t.Fatalf("Tail = %d, %v; want head 1", head, err)
	}
	batch := fencedEvents(2, 3)
	if err := a.Append(ctx, "s", batch); err != nil || batch[0] == nil {
		t.Fatalf("Append = %v; batch[0] = %v", err, batch[0])
	}
	if _, err := b.Fence(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "s", fencedEvents(4)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("stale Append = %v, want ErrFenced", err)
	}
	if err := b.Append(ctx, "s", fencedEvents(4)); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := b.Append(ctx, "s", fencedEvents(5)); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("the tail got seqs %v, want %v", got, want)
	}
}
