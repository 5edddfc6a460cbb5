package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestDurable_IdleConformance runs the conformance suites twice: with
// every session leaving memory before each call (two evictor passes), and
// with sessions leaving every millisecond on the journal's own evictor,
// racing every append, read and trim.
func TestDurable_IdleConformance(t *testing.T) {
	t.Parallel()
	jumping := func() journal.Options { return journal.Options{IdleAfter: time.Hour} }
	t.Run("before each call", func(t *testing.T) {
		t.Parallel()
		var evicted atomic.Uint64
		t.Cleanup(func() { // after every subtest
			if evicted.Load() == 0 {
				t.Error("no session left memory")
			}
		})
		testkit.RunJournalSuite(t, func(t *testing.T) journal.Journal {
			d := openDurable(t, t.TempDir(), jumping())
			t.Cleanup(func() { evicted.Add(d.Stats().Evicted) })
			return evicting{d}
		})
		testkit.RunDurableJournalSuite(t, func(t *testing.T, dir string) journal.Journal {
			d, err := journal.Open(dir, jumping())
			if err != nil {
				t.Fatalf("Open(%s): %v", dir, err)
			}
			return evicting{d}
		})
	})
	t.Run("every millisecond", func(t *testing.T) {
		t.Parallel()
		testkit.RunJournalSuite(t, func(t *testing.T) journal.Journal {
			return openDurable(t, t.TempDir(), journal.Options{IdleAfter: time.Millisecond})
		})
	})
}

// evicting lets every idle session leave memory before each call.
type evicting struct{ *journal.Durable }

// evict makes two passes: the first ends the epoch of the last use.
func (e evicting) evict() {
	_, _ = journal.EvictIdle(e.Durable)
	_, _ = journal.EvictIdle(e.Durable)
}

func (e evicting) Append(ctx context.Context, s messages.SessionID, evs []*messages.Encoded) error {
	e.evict()
	return e.Durable.Append(ctx, s, evs)
}

func (e evicting) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	e.evict()
	return e.Durable.ReadAfter(ctx, s, after, limit)
}

func (e evicting) Head(ctx context.Context, s messages.SessionID) (uint64, error) {
	e.evict()
	return e.Durable.Head(ctx, s)
}

func (e evicting) First(ctx context.Context, s messages.SessionID) (uint64, error) {
	e.evict()
	return e.Durable.First(ctx, s)
}

func (e evicting) Trim(ctx context.Context, s messages.SessionID, before uint64) error {
	e.evict()
	return e.Durable.Trim(ctx, s, before)
}

// TestDurable_IdleSessionsLeaveMemory: sessions unused for IdleAfter and
// without a live run leave memory; heads, first seqs, reads, the checksum
// chain, trims, the catalogue and Sessions are the same from the store;
// appends continue where they were; a reopened journal loads only the
// sessions written since they left.
func TestDurable_IdleSessionsLeaveMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	opts := journal.Options{IdleAfter: time.Hour} // the test makes the passes
	d, err := journal.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	advance := func() { // a pass: ends the epoch of the uses so far
		if _, err := journal.EvictIdle(d); err != nil {
			t.Fatal(err)
		}
	}
	const sessions = 50
	sid := func(i int) messages.SessionID { return messages.SessionID(fmt.Sprintf("t/s%02d", i)) }
	for i := range sessions {
		run := messages.RunID(fmt.Sprintf("r%02d", i))
		evs := []*messages.Encoded{messages.NewEncoded(1, messages.RunStarted, run, []byte(`{}`))}
		evs = append(evs, events(2, 5)...)
		if i > 0 { // s00's run stays live
			evs = append(evs, messages.NewEncoded(6, messages.RunFinished, run, []byte(`{}`)))
		}
		if err := d.Append(ctx, sid(i), evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Trim(ctx, sid(1), 3); err != nil {
		t.Fatal(err)
	}
	before := map[messages.SessionID][]*messages.Encoded{}
	for i := range sessions {
		before[sid(i)] = readAll(t, d, sid(i))
	}

	if n, err := journal.EvictIdle(d); n != 0 || err != nil {
		t.Fatalf("the first pass after their use = %d, %v; want 0", n, err)
	}
	if n, err := journal.EvictIdle(d); n != sessions-1 || err != nil {
		t.Fatalf("EvictIdle = %d, %v; want %d (all but the session with a live run)", n, err, sessions-1)
	}
	if m := d.Stats().InMemory; m != 1 {
		t.Fatalf("%d sessions in memory, want 1", m)
	}
	for i := range sessions {
		checkSession(t, d, sid(i), before[sid(i)])
	}
	if f, _ := d.First(ctx, sid(1)); f != 3 {
		t.Fatalf("First of the trimmed session after leaving memory = %d, want 3", f)
	}
	if got, err := d.Sessions(ctx); err != nil || len(got) != sessions {
		t.Fatalf("Sessions = %d sessions, %v; want %d", len(got), err, sessions)
	}
	if info, ok, err := d.Run(ctx, "r07"); err != nil || !ok || info.LastSeq != 6 {
		t.Fatalf("Run(r07) = %+v %t %v", info, ok, err)
	}
	if live, err := d.LiveRuns(ctx); err != nil || len(live) != 1 || live[0].Run != "r00" {
		t.Fatalf("LiveRuns = %+v, %v", live, err)
	}

	// Appends continue at the stored head, chained to the stored last
	// record (ReadAfter checks the chain across them).
	advance()
	if _, err := journal.EvictIdle(d); err != nil {
		t.Fatal(err)
	}
	if m := d.Stats().InMemory; m != 1 {
		t.Fatalf("%d sessions in memory after the reads and two passes, want 1", m)
	}
	var seqErr *journal.SeqError
	if err := d.Append(ctx, sid(2), events(8, 8)); !errors.As(err, &seqErr) || seqErr.Head != 6 {
		t.Fatalf("Append(8) after leaving memory = %v, want a SeqError at head 6", err)
	}
	advance()
	if _, err := journal.EvictIdle(d); err != nil {
		t.Fatal(err)
	}
	if err := d.Append(ctx, sid(2), events(7, 9)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d, sid(2)); len(got) != 9 {
		t.Fatalf("session 2 has %d events, want 9", len(got))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// A reopened journal loads the sessions the high-water mark log names:
	// the one with a live run and the one written since it left memory.
	d = openDurable(t, dir, opts)
	if m := d.Stats().InMemory; m > 2 {
		t.Fatalf("%d sessions loaded at Open, want at most 2", m)
	}
	for i := range sessions {
		if i == 2 {
			continue
		}
		checkSession(t, d, sid(i), before[sid(i)])
	}
	if err := d.Append(ctx, sid(3), events(7, 7)); err != nil {
		t.Fatal(err)
	}
	if live, err := d.LiveRuns(ctx); err != nil || len(live) != 1 || live[0].Run != "r00" {
		t.Fatalf("LiveRuns after reopening = %+v, %v", live, err)
	}
}

func readAll(t *testing.T, j journal.Journal, s messages.SessionID) []*messages.Encoded {
	t.Helper()
	evs, err := j.ReadAfter(context.Background(), s, 0, 1000)
	if err != nil {
		t.Fatalf("ReadAfter(%s): %v", s, err)
	}
	return evs
}

func checkSession(t *testing.T, d *journal.Durable, s messages.SessionID, want []*messages.Encoded) {
	t.Helper()
	ctx := context.Background()
	got := readAll(t, d, s)
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", s, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || string(got[i].JSON) != string(want[i].JSON) {
			t.Fatalf("%s: event %d = %d %s, want %d %s", s, i, got[i].Seq, got[i].JSON, want[i].Seq, want[i].JSON)
		}
	}
	if h, err := d.Head(ctx, s); err != nil || h != want[len(want)-1].Seq {
		t.Fatalf("%s: Head = %d, %v; want %d", s, h, err, want[len(want)-1].Seq)
	}
}

// TestDurable_NewSessionLookedUpOnce: a session the store does not hold is
// looked for there once, not by every call before its first Append; one
// that left memory is looked for again.
func TestDurable_NewSessionLookedUpOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDurable(t, t.TempDir(), journal.Options{IdleAfter: time.Hour})
	lookups := func() uint64 { return d.Stats().Lookups }
	for range 3 {
		if h, err := d.Head(ctx, "t/new"); h != 0 || err != nil {
			t.Fatalf("Head = %d, %v", h, err)
		}
	}
	if err := d.Append(ctx, "t/new", events(1, 3)); err != nil {
		t.Fatal(err)
	}
	if n := lookups(); n != 1 {
		t.Fatalf("%d look-ups in the store for three Heads and an Append of a new session, want 1", n)
	}
	for range 2 { // the first pass ends the epoch of the Append
		if _, err := journal.EvictIdle(d); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := d.Head(ctx, "t/new"); h != 3 || err != nil {
		t.Fatalf("Head after leaving memory = %d, %v; want 3", h, err)
	}
	if n := lookups(); n != 2 {
		t.Fatalf("%d look-ups, want 2 (the session was loaded again)", n)
	}
}

// TestDurable_ParkedSessionsDoNotFlush: an idle session with a live run
// (a parked run's) stays in memory, and a pass that has nothing else to
// evict does not flush the store for it.
func TestDurable_ParkedSessionsDoNotFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDurable(t, t.TempDir(), journal.Options{IdleAfter: time.Hour})
	if err := d.Append(ctx, "t/parked", []*messages.Encoded{messages.NewEncoded(1, messages.RunStarted, "r", []byte(`{}`))}); err != nil {
		t.Fatal(err)
	}
	before := journal.Flushes(d)
	for range 3 {
		if n, err := journal.EvictIdle(d); n != 0 || err != nil {
			t.Fatalf("EvictIdle = %d, %v; want 0", n, err)
		}
	}
	if got := journal.Flushes(d); got != before {
		t.Fatalf("%d flushes for a session that cannot leave, want none", got-before)
	}
	if m := d.Stats().InMemory; m != 1 {
		t.Fatalf("%d sessions in memory, want 1", m)
	}
}
