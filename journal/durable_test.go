package journal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

func openDurable(t testing.TB, dir string, opts journal.Options) *journal.Durable {
	t.Helper()
	d, err := journal.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestDurable_Conformance(t *testing.T) {
	t.Parallel()
	testkit.RunJournalSuite(t, func(t *testing.T) journal.Journal {
		return openDurable(t, t.TempDir(), journal.Options{})
	})
}

func TestDurable_ReopenConformance(t *testing.T) {
	t.Parallel()
	testkit.RunDurableJournalSuite(t, func(t *testing.T, dir string) journal.Journal {
		d, err := journal.Open(dir, journal.Options{})
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		return d
	})
}

func event(seq uint64) *messages.Encoded {
	return messages.NewEncoded(seq, messages.TextDelta, "r1", fmt.Appendf(nil, `{"seq":%d}`, seq))
}

func events(from, to uint64) []*messages.Encoded {
	var b []*messages.Encoded
	for q := from; q <= to; q++ {
		b = append(b, event(q))
	}
	return b
}

// fill appends batches to session until its head is n, then closes d.
func fill(t *testing.T, d *journal.Durable, session messages.SessionID, n uint64) {
	t.Helper()
	for q := uint64(1); q <= n; q += 100 {
		if err := d.Append(context.Background(), session, events(q, min(n, q+99))); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_Errors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	badMarker := t.TempDir()
	if err := os.WriteFile(filepath.Join(badMarker, "CONCLAVE-JOURNAL"), []byte("conclave journal 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"DirIsAFile", file, []string{"create data directory", file, "not a directory"}},
		{"ParentIsAFile", filepath.Join(file, "data"), []string{"create data directory", file, "not a directory"}},
		{"ForeignFiles", foreign, []string{foreign, "notes.txt", "not a Conclave journal"}},
		{"UnknownMarker", badMarker, []string{badMarker, "unknown content"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := journal.Open(c.dir, journal.Options{})
			if err == nil {
				d.Close()
				t.Fatalf("Open(%s) succeeded", c.dir)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Open(%s) = %q; want it to mention %q", c.dir, err, w)
				}
			}
		})
	}
	if ents, _ := os.ReadDir(foreign); len(ents) != 1 {
		t.Fatalf("Open wrote into a foreign directory: %v", ents)
	}
}

func TestOpen_AlreadyOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDurable(t, dir, journal.Options{})
	d2, err := journal.Open(dir, journal.Options{})
	if err == nil {
		d2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the directory", err)
	}
	t.Logf("second Open: %v", err)
	if err := d.Append(context.Background(), "s", events(1, 1)); err != nil {
		t.Fatalf("the first journal broke: %v", err)
	}
}

func TestOpen_Unwritable(t *testing.T) {
	t.Parallel()
	t.Run("Permissions", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes through directory permissions; see ReadOnlyFS")
		}
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		_, err := journal.Open(dir, journal.Options{})
		if err == nil || !strings.Contains(err.Error(), "not writable") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Open of a read-only directory = %v", err)
		}
	})
	t.Run("ReadOnlyFS", func(t *testing.T) {
		dir := t.TempDir()
		fs := readOnlyFS{FS: vfs.Default, err: syscall.EROFS}
		_, err := journal.Open(dir, journal.WithFS(journal.Options{}, fs))
		if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "not writable") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Open on a read-only filesystem = %v", err)
		}
	})
}

// TestOpen_Corrupt damages a closed journal in several ways; each time Open
// must fail, never start empty or drop events silently.
func TestOpen_Corrupt(t *testing.T) {
	t.Parallel()
	files := func(t *testing.T, dir, pattern string) []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no %s in %s (%v)", pattern, dir, err)
		}
		return m
	}
	truncate := func(t *testing.T, path string) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, st.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	// inTables leaves the events in sstables (Open replays the WAL into
	// one), inWAL leaves them in the write-ahead log only.
	inTables := func(t *testing.T) string {
		dir := t.TempDir()
		fill(t, openDurable(t, dir, journal.Options{}), "s", 5000)
		if err := openDurable(t, dir, journal.Options{}).Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	inWAL := func(t *testing.T) string {
		dir := t.TempDir()
		fill(t, openDurable(t, dir, journal.Options{}), "s", 5000)
		return dir
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T) string
	}{
		{"ManifestTruncated", func(t *testing.T) string {
			dir := inTables(t)
			for _, f := range files(t, dir, "MANIFEST-*") {
				truncate(t, f)
			}
			return dir
		}},
		{"ManifestGarbled", func(t *testing.T) string {
			dir := inTables(t)
			for _, f := range files(t, dir, "MANIFEST-*") {
				garbleAt(t, f, 0.3)
			}
			return dir
		}},
		{"TableTruncated", func(t *testing.T) string {
			dir := inTables(t)
			for _, f := range files(t, dir, "*.sst") {
				truncate(t, f)
			}
			return dir
		}},
		{"TableGarbled", func(t *testing.T) string {
			dir := inTables(t)
			for _, f := range files(t, dir, "*.sst") {
				st, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				garbleAt(t, f, 1-16/float64(st.Size())) // the footer: its last 16 bytes
			}
			return dir
		}},
		{"WALGarbledInTheMiddle", func(t *testing.T) string {
			dir := inWAL(t)
			for _, f := range files(t, dir, "*.log") {
				garbleAt(t, f, 0.5)
			}
			return dir
		}},
		{"StoreFilesRemoved", func(t *testing.T) string {
			dir := inTables(t)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "CONCLAVE-JOURNAL" {
					_ = os.RemoveAll(filepath.Join(dir, e.Name()))
				}
			}
			return dir
		}},
		{"MarkerRemoved", func(t *testing.T) string {
			dir := inTables(t)
			_ = os.Remove(filepath.Join(dir, "CONCLAVE-JOURNAL"))
			return dir
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := c.damage(t)
			d, err := journal.Open(dir, journal.Options{})
			if err == nil {
				defer d.Close()
				h, _ := d.Head(context.Background(), "s")
				_, rerr := d.ReadAfter(context.Background(), "s", 0, 10000)
				t.Fatalf("Open of a damaged journal succeeded: head %d, read error %v", h, rerr)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name the directory", err)
			}
			t.Logf("Open: %v", err)
		})
	}
}

// TestDurable_DamagedDataBlock garbles the middle of the tables, which
// Open does not read: reading past the damage must fail, never return
// wrong or missing events.
func TestDurable_DamagedDataBlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fill(t, openDurable(t, dir, journal.Options{}), "s", 5000)
	if err := openDurable(t, dir, journal.Options{}).Close(); err != nil { // WAL into a table
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no tables")
	}
	for _, f := range tables {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for k := len(b) / 2; k < len(b)/2+8; k++ {
			b[k] ^= 0xff
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Logf("Open: %v", err) // also acceptable
		return
	}
	defer d.Close()
	var after uint64
	for after < 5000 {
		evs, err := d.ReadAfter(ctx, "s", after, 512)
		if err != nil {
			t.Logf("ReadAfter(%d): %v", after, err)
			return
		}
		for _, e := range evs {
			if want := fmt.Sprintf(`{"seq":%d}`, e.Seq); e.Seq != after+1 || string(e.JSON) != want {
				t.Fatalf("read seq %d %s after %d", e.Seq, e.JSON, after)
			}
			after = e.Seq
		}
	}
	t.Fatal("read every event through a damaged table without an error")
}

// walFaults injects errors into, or blocks, the write-ahead log's writes
// and syncs.
type walFaults struct {
	fail    atomic.Pointer[error]
	block   atomic.Pointer[chan struct{}] // the next WAL sync waits for it to close
	entered chan struct{}
}

func (w *walFaults) fs() vfs.FS {
	w.entered = make(chan struct{}, 1)
	return newWALFS(func(sync bool) error {
		if err := w.fail.Load(); err != nil {
			return *err
		}
		if sync {
			if ch := w.block.Swap(nil); ch != nil {
				w.entered <- struct{}{}
				<-*ch
			}
		}
		return nil
	})
}

func TestDurable_DiskFullSurfaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var faults walFaults
	d := openDurable(t, dir, journal.WithFS(journal.Options{}, faults.fs()))
	if err := d.Append(ctx, "s", events(1, 10)); err != nil {
		t.Fatal(err)
	}
	enospc := error(syscall.ENOSPC)
	faults.fail.Store(&enospc)

	// Several sessions fail at once; none hangs, each gets the error.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := messages.SessionID(fmt.Sprintf("c%d", i))
			errs[i] = d.Append(ctx, s, events(1, 5))
		}()
	}
	err := d.Append(ctx, "s", events(11, 20))
	wg.Wait()
	for _, e := range append(errs, err) {
		if !errors.Is(e, journal.ErrWriteFailed) || !errors.Is(e, syscall.ENOSPC) {
			t.Fatalf("Append on a full disk = %v; want ErrWriteFailed wrapping ENOSPC", e)
		}
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the directory", err)
	}
	faults.fail.Store(nil) // the disk has room again: the journal still refuses
	if err := d.Append(ctx, "s", events(11, 11)); !errors.Is(err, journal.ErrWriteFailed) {
		t.Fatalf("Append after a failed write = %v; want ErrWriteFailed until reopened", err)
	}
	if err := d.Trim(ctx, "s", 3); !errors.Is(err, journal.ErrWriteFailed) {
		t.Fatalf("Trim after a failed write = %v", err)
	}
	if h, _ := d.Head(ctx, "s"); h != 10 {
		t.Fatalf("Head = %d after failed appends, want 10", h)
	}
	evs, err := d.ReadAfter(ctx, "s", 0, 100)
	if err != nil || len(evs) != 10 {
		t.Fatalf("ReadAfter after the failure = %d events, %v; want the 10 acknowledged", len(evs), err)
	}
	_ = d.Close() // may report the failure again

	d = openDurable(t, dir, journal.Options{})
	h, _ := d.Head(ctx, "s")
	if h != 10 && h != 20 { // the failed batch is either absent or whole
		t.Fatalf("Head after reopen = %d, want 10 (or 20)", h)
	}
	if err := d.Append(ctx, "s", events(h+1, h+1)); err != nil {
		t.Fatalf("Append after reopen: %v", err)
	}
}

// TestDurable_DiskFullInFlush fills the disk for table files only: the
// WAL (preallocated, recycled) still takes writes, so without the
// background error handling Append would block on a write stall.
func TestDurable_DiskFullInFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var full atomic.Bool
	fs := newTableFS(func(bool) error {
		if full.Load() {
			return syscall.ENOSPC
		}
		return nil
	})
	d := openDurable(t, t.TempDir(), journal.WithFS(journal.Options{MemTableSize: 1 << 20}, fs))
	full.Store(true)
	json := []byte(`{"pad":"` + strings.Repeat("x", 300) + `"}`)
	deadline := time.Now().Add(20 * time.Second)
	var head uint64
	for {
		batch := make([]*messages.Encoded, 256)
		for i := range batch {
			batch[i] = messages.NewEncoded(head+uint64(i)+1, messages.TextDelta, "r", json)
		}
		err := d.Append(ctx, "s", batch)
		if err != nil {
			if !errors.Is(err, journal.ErrWriteFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Append with a full disk = %v; want ErrWriteFailed wrapping ENOSPC", err)
			}
			t.Logf("refused after %d events: %v", head, err)
			break
		}
		head += uint64(len(batch))
		if time.Now().After(deadline) {
			t.Fatalf("appended %d events to a full disk without an error", head)
		}
	}
	if h, _ := d.Head(ctx, "s"); h != head {
		t.Fatalf("Head = %d, want %d", h, head)
	}
	full.Store(false)
	_ = d.Close()
}

// TestDurable_GroupCommit holds the WAL fsync of one append while others
// queue, and checks that all of those share the next fsync.
func TestDurable_GroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var faults walFaults
	d := openDurable(t, t.TempDir(), journal.WithFS(journal.Options{}, faults.fs()))
	if err := d.Append(ctx, "warm", events(1, 1)); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	faults.block.Store(&release)
	before := d.Stats()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Append(ctx, "first", events(1, 3)); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-faults.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first append never reached the WAL sync")
	}
	const waiting = 20
	for i := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Append(ctx, messages.SessionID(fmt.Sprintf("s%02d", i)), events(1, 2)); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for journal.QueuedCommits(d) < waiting {
		if time.Now().After(deadline) {
			t.Fatalf("only %d appends queued", journal.QueuedCommits(d))
		}
		time.Sleep(time.Millisecond) // polling under a deadline, not sequencing
	}
	close(release)
	wg.Wait()
	st := d.Stats()
	if c, a := st.Commits-before.Commits, st.Appends-before.Appends; c != 2 || a != waiting+1 {
		t.Fatalf("%d appends took %d commits; want %d appends in 2 commits", a, c, waiting+1)
	}
}

func TestDurable_ReadAfterKeepsContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDurable(t, t.TempDir(), journal.Options{})
	var batch []*messages.Encoded
	for q := uint64(1); q <= 700; q++ {
		run := messages.RunID(fmt.Sprintf("run-%d", q/100))
		typ := messages.TextDelta
		if q%7 == 0 {
			typ = messages.EventType("not_a_known_type")
		}
		batch = append(batch, messages.NewEncoded(q, typ, run, fmt.Appendf(nil, `{"seq":%d,"x":"%s"}`, q, strings.Repeat("y", int(q%50)))))
	}
	if err := d.Append(ctx, "s", batch); err != nil {
		t.Fatal(err)
	}
	var got []*messages.Encoded
	for after := uint64(0); after < 700; {
		page, err := d.ReadAfter(ctx, "s", after, 512)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	for i, e := range batch {
		g := got[i]
		if g.Seq != e.Seq || g.Type != e.Type || g.RunID != e.RunID || string(g.JSON) != string(e.JSON) {
			t.Fatalf("event %d read back as %d %s %s %s", e.Seq, g.Seq, g.Type, g.RunID, g.JSON)
		}
	}
	// The JSON of one event is its own: appending to it must not clobber the next.
	_ = append(got[0].JSON, "XXXXXXXX"...)
	if string(got[1].JSON) != string(batch[1].JSON) {
		t.Fatalf("appending to one event's JSON changed the next: %s", got[1].JSON)
	}
}
