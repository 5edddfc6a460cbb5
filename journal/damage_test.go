package journal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// logBuffer collects a journal's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

const damaged = messages.SessionID("acme/S1")

// damageFixture writes a journal whose session acme/S1 has events 1..40 in
// tables (verified by a reopen) and 41..400 in the write-ahead log only;
// run r1 starts at 1 and ends at 300, run r2 starts at 350. Session
// "other" has events 1..5 in tables only.
func damageFixture(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	d := openDurable(t, dir, journal.Options{})
	ev := func(seq uint64) *messages.Encoded {
		typ, run := messages.TextDelta, messages.RunID("r1")
		switch {
		case seq == 1:
			typ = messages.RunStarted
		case seq == 300:
			typ = messages.RunFinished
		case seq == 350:
			typ, run = messages.RunStarted, "r2"
		case seq > 350:
			run = "r2"
		}
		return messages.NewEncoded(seq, typ, run, fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("p", 200)))
	}
	appendRange := func(d *journal.Durable, from, to uint64) {
		for q := from; q <= to; q += 10 {
			var b []*messages.Encoded
			for s := q; s < q+10 && s <= to; s++ {
				b = append(b, ev(s))
			}
			if err := d.Append(ctx, damaged, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendRange(d, 1, 40)
	if err := d.Append(ctx, "other", events(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDurable(t, dir, journal.Options{}) // the WAL goes into a table
	appendRange(d, 41, 400)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lastWAL returns the newest write-ahead log of dir.
func lastWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s (%v)", dir, err)
	}
	slices.Sort(logs)
	return logs[len(logs)-1]
}

func garbleAt(t *testing.T, path string, at float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := int(float64(len(b)) * at)
	for k := i; k < min(len(b), i+16); k++ {
		b[k] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_DamagedWAL damages the write-ahead log in the ways an operator
// found: Open must refuse, naming the session, its last intact seq and the
// highest acknowledged seq; Repair must truncate the session, never reuse
// a seq, keep the catalogue consistent, and persist what it did.
func TestOpen_DamagedWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, wal string)
	}{
		{"Truncated", func(t *testing.T, wal string) {
			st, _ := os.Stat(wal)
			if err := os.Truncate(wal, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"GarbageInTheLastBlock", func(t *testing.T, wal string) { garbleAt(t, wal, 0.9) }},      // the store stops there silently
		{"GarbageBeforeSyncedRecords", func(t *testing.T, wal string) { garbleAt(t, wal, 0.3) }}, // the store refuses to open
		{"Deleted", func(t *testing.T, wal string) {
			if err := os.Remove(wal); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := damageFixture(t)
			c.damage(t, lastWAL(t, dir))

			d, err := journal.Open(dir, journal.Options{})
			if err == nil {
				d.Close()
				t.Fatal("Open of a journal that lost acknowledged events succeeded")
			}
			var de *journal.DamageError
			if !errors.Is(err, journal.ErrDamaged) || !errors.As(err, &de) {
				t.Fatalf("Open = %v; want a *DamageError", err)
			}
			t.Logf("Open: %v", err)
			if len(de.Sessions) != 1 || de.Sessions[0].Session != damaged {
				t.Fatalf("damaged sessions %+v; want only %s", de.Sessions, damaged)
			}
			ds := de.Sessions[0]
			if ds.Acknowledged != 400 || ds.LastIntact < 40 || ds.LastIntact >= 400 {
				t.Fatalf("damage %+v; want acknowledged 400 and last intact in 40..399", ds)
			}
			for _, want := range []string{string(damaged), fmt.Sprintf("last intact seq %d", ds.LastIntact), fmt.Sprintf("events %d..400", ds.LastIntact+1), "--repair"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("the error does not say %q: %v", want, err)
				}
			}
			if _, err := journal.Open(dir, journal.Options{}); !errors.Is(err, journal.ErrDamaged) {
				t.Fatalf("a second Open without Repair = %v; refusing must change nothing", err)
			}

			var logs logBuffer
			d = openDurable(t, dir, journal.Options{Repair: true, Logger: logs.logger()})
			if !strings.Contains(logs.String(), fmt.Sprintf("session=%s lost_from=%d lost_to=400 last_intact=%d", damaged, ds.LastIntact+1, ds.LastIntact)) {
				t.Fatalf("the repair did not log what was lost:\n%s", logs.String())
			}
			checkRepaired(t, d, ds.LastIntact)
			head, _ := d.Head(ctx, damaged)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			// The repair is durable: a plain Open now succeeds, with the same state.
			d = openDurable(t, dir, journal.Options{})
			if h, _ := d.Head(ctx, damaged); h != head {
				t.Fatalf("Head after reopen = %d, want %d", h, head)
			}
			checkRepaired(t, d, ds.LastIntact)
		})
	}
}

// checkRepaired checks acme/S1 after a repair that kept seqs 1..intact.
func checkRepaired(t *testing.T, d *journal.Durable, intact uint64) {
	t.Helper()
	ctx := context.Background()
	head, _ := d.Head(ctx, damaged)
	if head < 400 {
		t.Fatalf("Head after repair = %d; seqs up to 400 were acknowledged and must not be reused", head)
	}
	var se *journal.SeqError
	if err := d.Append(ctx, damaged, events(401, 401)); head > 400 && !errors.As(err, &se) {
		t.Fatalf("Append of seq 401 after repair (head %d) = %v; want a *SeqError", head, err)
	}
	evs, err := d.ReadAfter(ctx, damaged, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(evs)) < intact || evs[0].Seq != 1 || evs[intact-1].Seq != intact {
		t.Fatalf("ReadAfter(0) = %d events; want 1..%d first", len(evs), intact)
	}
	for i, e := range evs[:intact] {
		if e.Seq != uint64(i)+1 || !bytes.Contains(e.JSON, fmt.Appendf(nil, `{"seq":%d,`, e.Seq)) {
			t.Fatalf("event %d read back as seq %d %.30s", i+1, e.Seq, e.JSON)
		}
	}
	tail := evs[intact:]
	if len(tail) > 0 && tail[0].Seq <= 400 {
		t.Fatalf("after the lost range ReadAfter returns seq %d; want above 400", tail[0].Seq)
	}
	if len(tail) == 0 {
		// The next event goes above everything acknowledged.
		if err := d.Append(ctx, damaged, events(head+1, head+2)); err != nil {
			t.Fatalf("Append at head+1 = %d: %v", head+1, err)
		}
		tail = events(head+1, head+2)
	}
	// A reader inside the lost range jumps to the first event after it.
	for _, after := range []uint64{intact, intact + 1, 399} {
		got, err := d.ReadAfter(ctx, damaged, after, 10)
		if err != nil || fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(tail)) {
			t.Fatalf("ReadAfter(%d) = %v, %v; want %v", after, seqsOf(got), err, seqsOf(tail))
		}
	}
	if evs, err := d.ReadAfter(ctx, damaged, intact-2, 3); err != nil || fmt.Sprint(seqsOf(evs)) != fmt.Sprint([]uint64{intact - 1, intact, tail[0].Seq}) {
		t.Fatalf("ReadAfter across the lost range = %v, %v", seqsOf(evs), err)
	}
	if f, _ := d.First(ctx, damaged); f != 1 {
		t.Fatalf("First = %d", f)
	}
	// The catalogue matches the surviving events.
	r1, ok, err := d.Run(ctx, "r1")
	if err != nil || !ok || r1.FirstSeq != 1 {
		t.Fatalf("Run(r1) = %+v, %v, %v", r1, ok, err)
	}
	if want := uint64(300); intact < 300 && r1.LastSeq != 0 || intact >= 300 && r1.LastSeq != want {
		t.Fatalf("r1 after a repair to %d: LastSeq %d", intact, r1.LastSeq)
	}
	_, ok, _ = d.Run(ctx, "r2")
	if ok != (intact >= 350) {
		t.Fatalf("r2 (started at 350) after a repair to %d: known %v", intact, ok)
	}
	// Other sessions are untouched.
	if evs, err := d.ReadAfter(ctx, "other", 0, 10); err != nil || len(evs) != 5 {
		t.Fatalf("session other: %v, %v", seqsOf(evs), err)
	}
}

func seqsOf(evs []*messages.Encoded) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// TestOpen_DamagedHWM: the high-water mark log is what detects lost events;
// losing it or damaging its synced part is itself damage.
func TestOpen_DamagedHWM(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"Missing", func(t *testing.T, path string) { _ = os.Remove(path) }},
		{"Garbled", func(t *testing.T, path string) { garbleAt(t, path, 0.1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fill(t, openDurable(t, dir, journal.Options{}), "s", 100)
			c.damage(t, filepath.Join(dir, "CONCLAVE-JOURNAL-HWM"))
			_, err := journal.Open(dir, journal.Options{})
			var de *journal.DamageError
			if !errors.As(err, &de) || len(de.Files) != 1 || !strings.Contains(err.Error(), "CONCLAVE-JOURNAL-HWM") {
				t.Fatalf("Open = %v; want a *DamageError naming the HWM file", err)
			}
			var logs logBuffer
			d := openDurable(t, dir, journal.Options{Repair: true, Logger: logs.logger()})
			if !strings.Contains(logs.String(), "CONCLAVE-JOURNAL-HWM") {
				t.Fatalf("the repair did not log the HWM damage:\n%s", logs.String())
			}
			// Without the high-water mark log the repair cannot tell what
			// was acknowledged: the head goes to the reservation in the
			// floor log, above anything that may have been.
			if h, _ := d.Head(context.Background(), "s"); h < 100+1<<16 {
				t.Fatalf("Head = %d; want at least the reservation %d", h, 100+1<<16)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			openDurable(t, dir, journal.Options{}) // rebuilt
		})
	}
	t.Run("TornTail", func(t *testing.T) { // what a crash leaves: ignored
		dir := t.TempDir()
		fill(t, openDurable(t, dir, journal.Options{}), "s", 100)
		f, err := os.OpenFile(filepath.Join(dir, "CONCLAVE-JOURNAL-HWM"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write([]byte{0xc7, 0x4a, 'h', 0, 0, 0, 9, 1, 2})
		_ = f.Close()
		var logs logBuffer
		openDurable(t, dir, journal.Options{Logger: logs.logger()})
		if !strings.Contains(logs.String(), "unsynced end") {
			t.Fatalf("no warning about the torn tail:\n%s", logs.String())
		}
	})
}

// TestDurable_CorruptRecord plants records that fail their checksum or
// their chain: ReadAfter must fail with a *CorruptError and never return
// them; Open must find them among the records stored since the previous
// Open; Repair must cut the session there.
func TestDurable_CorruptRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		plant  func(t *testing.T, d *journal.Durable) // on seq 21
		detail string
	}{
		{"Checksum", func(t *testing.T, d *journal.Durable) {
			sum, err := journal.RecordSum(d, "s", 20)
			if err != nil {
				t.Fatal(err)
			}
			if err := journal.PutRecord(d, "s", 21, sum, event(21)); err != nil {
				t.Fatal(err)
			}
			// Flip the sum: same length, same content, wrong checksum.
			ev := event(21)
			v := []byte{2, 0, 0, 0, 0}
			v = append(v, byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum))
			v = append(v, byte(len(ev.Type)))
			v = append(v, ev.Type...)
			v = append(v, byte(len(ev.RunID)))
			v = append(v, ev.RunID...)
			v = append(v, ev.JSON...)
			if err := journal.PutRaw(d, "s", 21, v); err != nil {
				t.Fatal(err)
			}
		}, "checksum mismatch"},
		{"Chain", func(t *testing.T, d *journal.Durable) {
			// A well-formed record that was not written after seq 20.
			if err := journal.PutRecord(d, "s", 21, 12345, event(21)); err != nil {
				t.Fatal(err)
			}
		}, "chain broken"},
		{"Missing", func(t *testing.T, d *journal.Durable) {
			if err := journal.DeleteRaw(d, "s", 21); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := openDurable(t, dir, journal.Options{})
			if err := d.Append(ctx, "s", events(1, 40)); err != nil {
				t.Fatal(err)
			}
			c.plant(t, d)
			for _, after := range []uint64{0, 19, 20} {
				evs, err := d.ReadAfter(ctx, "s", after, 100)
				var ce *journal.CorruptError
				if !errors.Is(err, journal.ErrCorrupt) || !errors.As(err, &ce) || ce.Seq != 21 || ce.LastIntact != 20 || !strings.Contains(ce.Detail, c.detail) {
					t.Fatalf("ReadAfter(%d) = %v, %v; want a *CorruptError at seq 21 (%s), last intact 20", after, seqsOf(evs), err, c.detail)
				}
			}
			// From 22 on the records are intact. Read with 21 before
			// them, 22 may not chain to a replaced 21: refusing it is
			// right too.
			evs, err := d.ReadAfter(ctx, "s", 21, 100)
			var ce *journal.CorruptError
			if !(err == nil && len(evs) == 19) && !(c.name == "Chain" && errors.As(err, &ce) && ce.Seq == 22) {
				t.Fatalf("ReadAfter(21) = %v, %v", seqsOf(evs), err)
			}
			if evs, err := d.ReadAfter(ctx, "s", 22, 100); err != nil || len(evs) != 18 {
				t.Fatalf("ReadAfter(22) = %v, %v", seqsOf(evs), err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = journal.Open(dir, journal.Options{})
			var de *journal.DamageError
			if !errors.As(err, &de) || len(de.Sessions) != 1 || de.Sessions[0].LastIntact != 20 || de.Sessions[0].Acknowledged != 40 {
				t.Fatalf("Open = %v; want session s damaged after seq 20", err)
			}
			d = openDurable(t, dir, journal.Options{Repair: true})
			checkState(t, d, "s", 1, 40+1<<16)
			if evs, err := d.ReadAfter(ctx, "s", 0, 100); err != nil || len(evs) != 20 {
				t.Fatalf("ReadAfter after repair = %v, %v", seqsOf(evs), err)
			}
		})
	}
}

func checkState(t *testing.T, j journal.Journal, s messages.SessionID, first, head uint64) {
	t.Helper()
	f, _ := j.First(context.Background(), s)
	h, _ := j.Head(context.Background(), s)
	if f != first || h != head {
		t.Fatalf("session %s: First, Head = %d, %d; want %d, %d", s, f, h, first, head)
	}
}

// TestDurable_Reservations: a reservation is fsynced once per reserveAhead
// events of a session, not per commit.
func TestDurable_Reservations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := openDurable(t, dir, journal.Options{})
	for q := uint64(1); q <= 70000; q += 500 {
		if err := d.Append(ctx, "s", events(q, q+499)); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); st.Reservations != 2 { // at seq 500 (up to 66036), and at 66500
		t.Fatalf("%d reservations for 70000 events in 140 commits", st.Reservations)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDurable(t, dir, journal.Options{})
	if err := d.Append(ctx, "s", events(70001, 70100)); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Reservations != 0 { // Open reserved ahead
		t.Fatalf("%d reservations after reopen", st.Reservations)
	}
}

func TestOpen_Locked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openDurable(t, dir, journal.Options{})
	_, err := journal.Open(dir, journal.Options{})
	if !errors.Is(err, journal.ErrLocked) || !strings.Contains(err.Error(), "in use by another conclave server") {
		t.Fatalf("second Open = %v; want ErrLocked", err)
	}
}

// TestOpen_LostTailOfTrimmedSession: a trimmed session's record keeps its
// head, so only the check of the stored events finds a lost tail.
func TestOpen_LostTailOfTrimmedSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d := openDurable(t, dir, journal.Options{})
	if err := d.Append(ctx, "s", events(1, 30)); err != nil {
		t.Fatal(err)
	}
	if err := d.Trim(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	for q := uint64(28); q <= 30; q++ {
		if err := journal.DeleteRaw(d, "s", q); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := journal.Open(dir, journal.Options{})
	var de *journal.DamageError
	if !errors.As(err, &de) || len(de.Sessions) != 1 || de.Sessions[0].LastIntact != 27 || de.Sessions[0].Acknowledged != 30 {
		t.Fatalf("Open = %v; want session s damaged after seq 27", err)
	}
	d = openDurable(t, dir, journal.Options{Repair: true})
	checkState(t, d, "s", 10, 30+1<<16)
}

// removeWALs deletes dir's write-ahead logs (what an operator or a failing
// disk did in issue 27).
func removeWALs(t *testing.T, dir string) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s (%v)", dir, err)
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpen_DoubleFault: a damaged or missing high-water mark log together
// with a lost or cut write-ahead log. Open must refuse (never start empty),
// and a repair must put every session's next seq above anything that may
// have been acknowledged (never hand a seq out twice).
func TestOpen_DoubleFault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sessions := map[messages.SessionID]uint64{"a": 120, "b": 300, "c": 45}
	fixture := func(t *testing.T) string {
		dir := t.TempDir()
		d := openDurable(t, dir, journal.Options{})
		for s, n := range sessions {
			for q := uint64(1); q <= n; q += 10 {
				if err := d.Append(ctx, s, events(q, min(n, q+9))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := d.Close(); err != nil { // a graceful stop: the events stay in the WAL
			t.Fatal(err)
		}
		return dir
	}
	flipLast := func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 1 // in the snapshot's last frame
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cutWAL := func(t *testing.T, dir string) {
		path := lastWAL(t, dir)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, st.Size()/4); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"FlippedHWMAndWALGone", func(t *testing.T, dir string) {
			flipLast(t, filepath.Join(dir, "CONCLAVE-JOURNAL-HWM"))
			removeWALs(t, dir)
		}},
		{"HWMDeletedAndWALCut", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, "CONCLAVE-JOURNAL-HWM"))
			cutWAL(t, dir)
		}},
		{"BothMarkLogsGoneAndWALCut", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, "CONCLAVE-JOURNAL-HWM"))
			_ = os.Remove(filepath.Join(dir, "CONCLAVE-JOURNAL-FLOOR"))
			cutWAL(t, dir)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := fixture(t)
			c.damage(t, dir)
			_, err := journal.Open(dir, journal.Options{})
			if !errors.Is(err, journal.ErrDamaged) {
				t.Fatalf("Open = %v; want ErrDamaged, not a journal that forgot what it acknowledged", err)
			}
			d := openDurable(t, dir, journal.Options{Repair: true})
			for s, acked := range sessions {
				h, err := d.Head(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				if c.name == "BothMarkLogsGoneAndWALCut" && h == 0 {
					continue // nothing of it reached a table or a log: it cannot be protected (logged)
				}
				if h < acked {
					t.Fatalf("session %s: head %d after the repair; seqs up to %d were acknowledged: seq %d would be handed out again",
						s, h, acked, h+1)
				}
				if err := d.Append(ctx, s, []*messages.Encoded{event(h + 1)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			openDurable(t, dir, journal.Options{}) // repaired: opens without Repair
		})
	}
}

// TestDurable_DataDirRemoved (issue 27 item 7): the data directory is
// removed under an open journal. Idle, the watch fails the journal within
// its period; writing, the store's own failure (it cannot create its next
// write-ahead log) fails it. Either way Append is refused with
// ErrWriteFailed, Failed is closed, and nothing crashes, hangs or spins:
// before, the process died with "fatal error: sync: unlock of unlocked
// mutex". The writing case runs in a child process: the store's goroutine
// stays parked there and the store cannot be closed (goleak would object).
func TestDurable_DataDirRemoved(t *testing.T) {
	t.Parallel()
	t.Run("Idle", func(t *testing.T) {
		t.Parallel()
		removeUnder(t, false)
	})
	t.Run("Writing", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurable_DataDirRemovedChild$", "-test.v")
		cmd.Env = append(os.Environ(), "CONCLAVE_TEST_REMOVE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("child: ok")) {
			t.Fatalf("child: %v\n%s", err, out)
		}
	})
}

// TestDurable_DataDirRemovedChild is TestDurable_DataDirRemoved's writing
// case, in a child process; it exits without goleak's check.
func TestDurable_DataDirRemovedChild(t *testing.T) {
	if os.Getenv("CONCLAVE_TEST_REMOVE_CHILD") == "" {
		t.Skip("run by TestDurable_DataDirRemoved")
	}
	removeUnder(t, true)
	if t.Failed() {
		os.Exit(1)
	}
	fmt.Println("child: ok")
	os.Exit(0)
}

func removeUnder(t *testing.T, writing bool) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "journal")
	var logs logBuffer
	watch := 10 * time.Millisecond
	if writing {
		watch = -1 // the store's own failure, not the watch's
	}
	d, err := journal.Open(dir, journal.Options{Logger: logs.logger(), MemTableSize: 1 << 20, WatchEvery: watch})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Append(ctx, "s", events(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	seq := uint64(10)
	if writing {
		// 1 MiB memtables: the store needs a new write-ahead log within a
		// few thousand events, and cannot create it.
		for i := 0; i < 100_000 && d.Err() == nil; i++ {
			if err := d.Append(ctx, "s", events(seq+1, seq+100)); err != nil {
				break
			}
			seq += 100
		}
	}
	select {
	case <-d.Failed():
	case <-time.After(10 * time.Second):
		t.Fatalf("the journal did not fail after its directory was removed (head %d)\n%s", seq, logs.String())
	}
	if err := d.Append(ctx, "s", events(seq+1, seq+1)); !errors.Is(err, journal.ErrWriteFailed) {
		t.Fatalf("Append after the failure = %v, want ErrWriteFailed", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("Close of a failed journal = nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung")
	}
}
