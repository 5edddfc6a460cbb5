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

	t.Run("EmptyBatch", func(t *testing.T) {
		j := open(t)
		if err := j.Append(ctx, "s", nil); err != nil {
			t.Fatalf("Append of no events = %v", err)
		}
		if h, _ := j.Head(ctx, "s"); h != 0 {
			t.Fatalf("Head = %d after an empty append", h)
		}
		if ss, _ := j.Sessions(ctx); len(ss) != 0 {
			t.Fatalf("Sessions = %v after an empty append", ss)
		}
	})

	t.Run("Sessions", func(t *testing.T) {
		j := open(t)
		if ss, err := j.Sessions(ctx); err != nil || len(ss) != 0 {
			t.Fatalf("Sessions of an empty journal = %v, %v", ss, err)
		}
		for _, s := range []messages.SessionID{"b", "a", "a-longer", "c"} {
			if err := j.Append(ctx, s, batch(1, 2)); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = j.Head(ctx, "unknown")          // a lookup creates no session
		_, _ = j.ReadAfter(ctx, "other", 0, 1) // nor does a read
		ss, err := j.Sessions(ctx)
		if err != nil || fmt.Sprint(ss) != "[a a-longer b c]" {
			t.Fatalf("Sessions = %v, %v; want [a a-longer b c]", ss, err)
		}
	})

	t.Run("FirstAndTrim", func(t *testing.T) {
		j := open(t)
		if f, err := j.First(ctx, "s"); err != nil || f != 0 {
			t.Fatalf("First of unknown session = %d, %v; want 0", f, err)
		}
		if err := j.Trim(ctx, "s", 5); err != nil {
			t.Fatalf("Trim of unknown session = %v", err)
		}
		if err := j.Append(ctx, "s", batch(1, 10)); err != nil {
			t.Fatal(err)
		}
		if f, _ := j.First(ctx, "s"); f != 1 {
			t.Fatalf("First = %d, want 1", f)
		}
		if err := j.Trim(ctx, "s", 4); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "s", 4, 10)
		for _, c := range []struct {
			after uint64
			limit int
			want  string
		}{
			{0, 100, "[4 5 6 7 8 9 10]"}, // cursor before First: starts at First
			{2, 3, "[4 5 6]"},
			{3, 2, "[4 5]"},
			{5, 2, "[6 7]"},
			{10, 5, "[]"},
		} {
			evs, err := j.ReadAfter(ctx, "s", c.after, c.limit)
			if err != nil || fmt.Sprint(seqs(evs)) != c.want {
				t.Fatalf("ReadAfter(%d, %d) = %v, %v; want %s", c.after, c.limit, seqs(evs), err, c.want)
			}
		}
		if err := j.Trim(ctx, "s", 2); err != nil { // below First: nothing to do
			t.Fatal(err)
		}
		checkState(t, j, "s", 4, 10)
		if err := j.Trim(ctx, "s", 1000); err != nil { // capped at head+1
			t.Fatal(err)
		}
		checkState(t, j, "s", 11, 10)
		if evs, err := j.ReadAfter(ctx, "s", 0, 10); err != nil || len(evs) != 0 {
			t.Fatalf("ReadAfter after trimming everything = %v, %v", seqs(evs), err)
		}
		if ss, _ := j.Sessions(ctx); fmt.Sprint(ss) != "[s]" {
			t.Fatalf("Sessions = %v; a session trimmed empty keeps its head", ss)
		}
		var se *journal.SeqError
		if err := j.Append(ctx, "s", batch(1, 1)); !errors.As(err, &se) || se.Head != 10 {
			t.Fatalf("Append of seq 1 after trimming everything = %v; seqs are never reused", err)
		}
		if err := j.Append(ctx, "s", batch(11, 12)); err != nil {
			t.Fatal(err)
		}
		checkState(t, j, "s", 11, 12)
		if evs, _ := j.ReadAfter(ctx, "s", 3, 10); fmt.Sprint(seqs(evs)) != "[11 12]" {
			t.Fatalf("ReadAfter(3) = %v, want [11 12]", seqs(evs))
		}
	})

	t.Run("ConcurrentSessions", func(t *testing.T) {
		j := open(t)
		const sessions, batches, per = 16, 20, 7
		var wg sync.WaitGroup
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := messages.SessionID(fmt.Sprintf("s%02d", i))
				for b := range uint64(batches) {
					if err := j.Append(ctx, s, batch(b*per+1, b*per+per)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		ss, _ := j.Sessions(ctx)
		if len(ss) != sessions {
			t.Fatalf("Sessions = %v", ss)
		}
		for _, s := range ss {
			evs, err := j.ReadAfter(ctx, s, 0, batches*per+10)
			if err != nil || len(evs) != batches*per || evs[len(evs)-1].Seq != batches*per {
				t.Fatalf("session %s: read %d events, %v", s, len(evs), err)
			}
		}
	})

	t.Run("ConcurrentReadersDuringTrim", func(t *testing.T) {
		j := open(t)
		const total = 3000
		done := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var cursor uint64
				for {
					select {
					case <-done:
						return
					default:
					}
					evs, err := j.ReadAfter(ctx, "s", cursor, 50)
					if err != nil {
						t.Error(err)
						return
					}
					for i, e := range evs {
						if e.Seq <= cursor || i > 0 && e.Seq != evs[i-1].Seq+1 {
							t.Errorf("read %v after %d", seqs(evs), cursor)
							return
						}
					}
					if len(evs) > 0 && evs[0].Seq != cursor+1 {
						// A jump: only over trimmed events.
						if f, _ := j.First(ctx, "s"); evs[0].Seq > f {
							t.Errorf("jump from %d to %d while First is %d", cursor, evs[0].Seq, f)
							return
						}
					}
					if len(evs) > 0 {
						cursor = evs[len(evs)-1].Seq
					}
					if cursor == total {
						cursor = 0
					}
				}
			}()
		}
		for q := uint64(1); q <= total; q += 10 {
			if err := j.Append(ctx, "s", batch(q, q+9)); err != nil {
				t.Fatal(err)
			}
			if q%100 == 1 {
				if err := j.Trim(ctx, "s", q/2+1); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(done)
		wg.Wait()
	})

	runCatalogSuite(t, open)

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
		if _, err := j.First(ctx, "s"); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("First after Close = %v", err)
		}
		if err := j.Trim(ctx, "s", 1); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("Trim after Close = %v", err)
		}
		if _, err := j.Sessions(ctx); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("Sessions after Close = %v", err)
		}
		if c, ok := j.(journal.Catalog); ok {
			if _, err := c.LiveRuns(ctx); !errors.Is(err, journal.ErrClosed) {
				t.Fatalf("LiveRuns after Close = %v", err)
			}
			if _, _, err := c.Run(ctx, "r"); !errors.Is(err, journal.ErrClosed) {
				t.Fatalf("Run after Close = %v", err)
			}
			if _, _, err := c.ListRuns(ctx, "", "", 10); !errors.Is(err, journal.ErrClosed) {
				t.Fatalf("ListRuns after Close = %v", err)
			}
			if err := c.PutRunSummary(ctx, "r", nil); !errors.Is(err, journal.ErrClosed) {
				t.Fatalf("PutRunSummary after Close = %v", err)
			}
		}
	})
}

// checkState fails t unless session has the given First and Head.
func checkState(t *testing.T, j journal.Journal, session messages.SessionID, first, head uint64) {
	t.Helper()
	ctx := context.Background()
	f, err1 := j.First(ctx, session)
	h, err2 := j.Head(ctx, session)
	if err := errors.Join(err1, err2); err != nil || f != first || h != head {
		t.Fatalf("session %s: First, Head = %d, %d (%v); want %d, %d", session, f, h, err, first, head)
	}
}

// RunDurableJournalSuite checks what only a journal on disk can keep: that
// everything acknowledged, and the retention state, survive Close and a
// new open of the same directory. open opens (or creates) the journal in
// dir; the suite closes it. Run RunJournalSuite on the implementation too.
func RunDurableJournalSuite(t *testing.T, open func(t *testing.T, dir string) journal.Journal) {
	t.Helper()
	ctx := context.Background()
	reopen := func(t *testing.T, j journal.Journal, dir string) journal.Journal {
		t.Helper()
		if err := j.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		j = open(t, dir)
		t.Cleanup(func() { _ = j.Close() })
		return j
	}
	start := func(t *testing.T) (journal.Journal, string) {
		dir := t.TempDir()
		j := open(t, dir)
		t.Cleanup(func() { _ = j.Close() })
		return j, dir
	}
	ev := func(seq uint64, run messages.RunID) *messages.Encoded {
		return messages.NewEncoded(seq, messages.TextDelta, run, fmt.Appendf(nil, `{"seq":%d,"pad":"%0*d"}`, seq, int(seq%300), 0))
	}

	t.Run("ReopenKeepsEvents", func(t *testing.T) {
		j, dir := start(t)
		want := map[messages.SessionID][]*messages.Encoded{}
		for i, s := range []messages.SessionID{"alpha", "b", "alpha-2", "z"} {
			var seq uint64
			for b := range 5 + i {
				var batch []*messages.Encoded
				for range 1 + b*3 {
					seq++
					batch = append(batch, ev(seq, messages.RunID(fmt.Sprintf("run-%d", b%2))))
				}
				if err := j.Append(ctx, s, batch); err != nil {
					t.Fatal(err)
				}
				want[s] = append(want[s], batch...)
			}
		}
		other := messages.NewEncoded(1, messages.RunStarted, "", []byte(`{}`)) // empty run id
		if err := j.Append(ctx, "other", []*messages.Encoded{other}); err != nil {
			t.Fatal(err)
		}
		want["other"] = []*messages.Encoded{other}

		j = reopen(t, j, dir)
		ss, err := j.Sessions(ctx)
		if err != nil || fmt.Sprint(ss) != "[alpha alpha-2 b other z]" {
			t.Fatalf("Sessions after reopen = %v, %v", ss, err)
		}
		for s, evs := range want {
			checkState(t, j, s, 1, uint64(len(evs)))
			got, err := j.ReadAfter(ctx, s, 0, 1000)
			if err != nil || len(got) != len(evs) {
				t.Fatalf("session %s: read %d events, %v; want %d", s, len(got), err, len(evs))
			}
			for i, e := range evs {
				g := got[i]
				if g.Seq != e.Seq || g.Type != e.Type || g.RunID != e.RunID || string(g.JSON) != string(e.JSON) {
					t.Fatalf("session %s event %d = %d %s %q %s; want %d %s %q %s", s, i, g.Seq, g.Type, g.RunID, g.JSON, e.Seq, e.Type, e.RunID, e.JSON)
				}
			}
		}
		if err := j.Append(ctx, "b", []*messages.Encoded{ev(uint64(len(want["b"]))+1, "r")}); err != nil {
			t.Fatalf("append after reopen: %v", err)
		}
	})

	t.Run("ReopenKeepsTrim", func(t *testing.T) {
		j, dir := start(t)
		var batch []*messages.Encoded
		for q := uint64(1); q <= 20; q++ {
			batch = append(batch, ev(q, "r"))
		}
		if err := j.Append(ctx, "part", batch); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(ctx, "all", batch[:7]); err != nil {
			t.Fatal(err)
		}
		if err := j.Trim(ctx, "part", 12); err != nil {
			t.Fatal(err)
		}
		if err := j.Trim(ctx, "all", 8); err != nil {
			t.Fatal(err)
		}
		j = reopen(t, j, dir)
		checkState(t, j, "part", 12, 20)
		checkState(t, j, "all", 8, 7)
		if evs, _ := j.ReadAfter(ctx, "part", 0, 100); len(evs) != 9 || evs[0].Seq != 12 {
			t.Fatalf("ReadAfter(part, 0) after reopen: %d events from %v", len(evs), evs)
		}
		if ss, _ := j.Sessions(ctx); fmt.Sprint(ss) != "[all part]" {
			t.Fatalf("Sessions = %v", ss)
		}
		var se *journal.SeqError
		if err := j.Append(ctx, "all", batch[:1]); !errors.As(err, &se) {
			t.Fatalf("Append of seq 1 to a session trimmed empty, after reopen = %v; want a *SeqError (seqs are never reused)", err)
		}
		if err := j.Append(ctx, "all", []*messages.Encoded{ev(8, "r")}); err != nil {
			t.Fatal(err)
		}
		j = reopen(t, j, dir)
		checkState(t, j, "all", 8, 8)
	})

	t.Run("ReopenKeepsCatalog", func(t *testing.T) {
		j, dir := start(t)
		if _, ok := j.(journal.Catalog); !ok {
			t.Skipf("%T has no run catalogue", j)
		}
		rb := newRunBatches()
		mustAppend(t, j, "a/s", rb.next("a/s", runStart("r1"), runDelta("r1"), runFinish("r1"), runStart("r2"), runDelta("r2")))
		mustAppend(t, j, "b/s", rb.next("b/s", runStart("r3")))
		if err := j.(journal.Catalog).PutRunSummary(ctx, "r1", []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		j = reopen(t, j, dir)
		c := j.(journal.Catalog)
		checkRun(t, c, journal.RunInfo{Run: "r1", Session: "a/s", FirstSeq: 1, LastSeq: 3, Summary: []byte(`{"n":1}`)})
		checkLive(t, c, "r2", "r3")
		if err := j.Trim(ctx, "a/s", 100); err != nil { // the live run's start survives a reopen too
			t.Fatal(err)
		}
		checkState(t, j, "a/s", 4, 5)
		mustAppend(t, j, "a/s", rb.next("a/s", runFinish("r2"), runStart("r4"))) // new runs come after the old ones
		if got := listAll(t, c, "", 2); fmt.Sprint(got) != "[r1 r2 r3 r4]" {
			t.Fatalf("ListRuns after reopen = %v", got)
		}
		j = reopen(t, j, dir)
		c = j.(journal.Catalog)
		checkLive(t, c, "r3", "r4")
		if got := listAll(t, c, "a", 10); fmt.Sprint(got) != "[r1 r2 r4]" {
			t.Fatalf("ListRuns(a) after reopen = %v", got)
		}
	})

	t.Run("ReopenAfterClose", func(t *testing.T) {
		j, dir := start(t)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j = open(t, dir)
		defer j.Close()
		if ss, err := j.Sessions(ctx); err != nil || len(ss) != 0 {
			t.Fatalf("Sessions of a reopened empty journal = %v, %v", ss, err)
		}
	})
}
