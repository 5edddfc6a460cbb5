package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// RunJournalSuite checks that a journal.Journal implementation keeps the
// contract documented on the interface. newJournal returns a fresh, empty
// journal; the suite closes it.
func RunJournalSuite(t *testing.T, newJournal func(t *testing.T) journal.Journal) {
	t.Helper()
	ev := func(seq uint64) *messages.Encoded {
		return messages.NewEncoded(seq, messages.TextDelta, "r1", fmt.Appendf(nil, `{"seq":%d}`, seq))
	}
	batch := func(from, to uint64) []*messages.Encoded {
		var b []*messages.Encoded
		for q := from; q <= to; q++ {
			b = append(b, ev(q))
		}
		return b
	}
	open := func(t *testing.T) journal.Journal {
		j := newJournal(t)
		t.Cleanup(func() { _ = j.Close() })
		return j
	}
	ctx := context.Background()
	seqs := func(evs []*messages.Encoded) []uint64 {
		out := make([]uint64, len(evs))
		for i, e := range evs {
			out[i] = e.Seq
		}
		return out
	}

	t.Run("EmptySession", func(t *testing.T) {
		j := open(t)
		if h, err := j.Head(ctx, "nobody"); err != nil || h != 0 {
			t.Fatalf("Head of unknown session = %d, %v; want 0, nil", h, err)
		}
		if evs, err := j.ReadAfter(ctx, "nobody", 0, 10); err != nil || len(evs) != 0 {
			t.Fatalf("ReadAfter of unknown session = %v, %v", seqs(evs), err)
		}
	})

	t.Run("AppendAndRead", func(t *testing.T) {
		j := open(t)
		if err := j.Append(ctx, "s", batch(1, 5)); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(ctx, "s", batch(6, 6)); err != nil {
			t.Fatal(err)
		}
		if h, _ := j.Head(ctx, "s"); h != 6 {
			t.Fatalf("Head = %d, want 6", h)
		}
		for _, c := range []struct {
			after uint64
			limit int
			want  []uint64
		}{
			{0, 100, []uint64{1, 2, 3, 4, 5, 6}},
			{2, 2, []uint64{3, 4}},
			{5, 10, []uint64{6}},
			{6, 10, nil},
			{60, 10, nil},
		} {
			evs, err := j.ReadAfter(ctx, "s", c.after, c.limit)
			if err != nil || fmt.Sprint(seqs(evs)) != fmt.Sprint(c.want) && !(len(evs) == 0 && len(c.want) == 0) {
				t.Fatalf("ReadAfter(%d, %d) = %v, %v; want %v", c.after, c.limit, seqs(evs), err, c.want)
			}
		}
		evs, _ := j.ReadAfter(ctx, "s", 0, 1)
		if string(evs[0].JSON) != `{"seq":1}` || evs[0].Type != messages.TextDelta || evs[0].RunID != "r1" {
			t.Fatalf("stored event = %+v %s", evs[0], evs[0].JSON)
		}
	})

	t.Run("SessionsAreSeparate", func(t *testing.T) {
		j := open(t)
		if err := j.Append(ctx, "a", batch(1, 3)); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(ctx, "b", batch(1, 1)); err != nil {
			t.Fatal(err)
		}
		if h, _ := j.Head(ctx, "b"); h != 1 {
			t.Fatalf("Head(b) = %d", h)
		}
	})

	t.Run("SeqMustContinue", func(t *testing.T) {
		j := open(t)
		if err := j.Append(ctx, "s", batch(1, 2)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]*messages.Encoded{batch(4, 5), batch(2, 3), {ev(3), ev(5)}, batch(1, 1)} {
			var se *journal.SeqError
			if err := j.Append(ctx, "s", bad); !errors.As(err, &se) {
				t.Fatalf("Append %v = %v, want *journal.SeqError", seqs(bad), err)
			}
		}
		if h, _ := j.Head(ctx, "s"); h != 2 {
			t.Fatalf("a refused batch changed the head to %d", h) // atomic: nothing of it stored
		}
		if err := j.Append(ctx, "s", batch(3, 3)); err != nil {
			t.Fatalf("the right next seq after refusals: %v", err)
		}
	})

	t.Run("ConcurrentReadersDuringAppend", func(t *testing.T) {
		j := open(t)
		const total = 2000
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var cursor uint64
				for cursor < total {
					evs, err := j.ReadAfter(ctx, "s", cursor, 64)
					if err != nil {
						t.Error(err)
						return
					}
					for _, e := range evs {
						if e.Seq != cursor+1 {
							t.Errorf("read seq %d after %d", e.Seq, cursor)
							return
						}
						cursor = e.Seq
					}
				}
			}()
		}
		for q := uint64(1); q <= total; q += 10 {
			if err := j.Append(ctx, "s", batch(q, q+9)); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
	})

	t.Run("Closed", func(t *testing.T) {
		j := newJournal(t)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		if err := j.Append(ctx, "s", batch(1, 1)); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("Append after Close = %v", err)
		}
		if _, err := j.ReadAfter(ctx, "s", 0, 1); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("ReadAfter after Close = %v", err)
		}
		if _, err := j.Head(ctx, "s"); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("Head after Close = %v", err)
		}
	})
}
