package journal

// What Open does after the store opened: read the high-water mark log,
// load and verify every session, find the damaged ones, and either refuse
// (a *DamageError) or repair them; migrate a format-1 journal.
//
// Damage. A session is damaged when
//   - its stored events end below the highest seq the high-water mark log
//     says was acknowledged (Pebble stops replaying a write-ahead log at a
//     truncation or at garbage in its last block, silently), or it has no
//     state at all while the log knows it (the write-ahead log was deleted);
//   - a record stored since the previous Open fails its checksum, does not
//     chain to the record before it, or is missing (a gap).
//
// Open verifies, per session, the records from the one it verified at the
// previous Open (kept in the high-water mark log) to the last stored one:
// the events appended since the previous Open, which are the ones that may
// still sit in a write-ahead log. Older records are in tables that Pebble
// checksums per block, and every read verifies them again.
//
// A write-ahead log that Pebble refuses to replay (garbage followed by
// synced records) is located through the store's error; without Repair the
// store is opened read-only on a view of that log cut at its last intact
// record, so that the *DamageError can name the sessions and seqs it lost.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
)

// openStore opens Pebble. If a write-ahead log cannot be replayed, it
// cuts it at its last intact record (with repair) or opens a read-only view
// in which it ends there, and describes the damage; then the next log may
// fail, up to maxWALRepairs of them.
func (d *Durable) openStore(po *pebble.Options, repair bool) (*pebble.DB, string, error) {
	const maxWALRepairs = 16
	view := cutFS{FS: po.FS, cuts: map[string]int64{}}
	var notes []string
	for range maxWALRepairs {
		opts := po
		if len(view.cuts) > 0 && !repair {
			o := *po
			o.ReadOnly, o.FS = true, view
			opts = &o
		}
		db, err := pebble.Open(d.dir, opts)
		if err == nil {
			return db, strings.Join(notes, "; "), nil
		}
		num, path, ok := walReplayFailure(err)
		if !ok {
			return nil, "", storeError("open", d.dir, err)
		}
		end, size, lerr := intactWALPrefix(d.fs, path, num)
		if _, seen := view.cuts[path]; lerr != nil || seen {
			return nil, "", storeError("open", d.dir, fmt.Errorf("%w (locating the damage: %v)", err, lerr))
		}
		note := fmt.Sprintf("write-ahead log %s is damaged: the store cannot replay it past byte %d of %d", d.fs.PathBase(path), end, size)
		notes = append(notes, note)
		if !repair {
			view.cuts[path] = end
			continue
		}
		backup, err := cutWAL(d.fs, d.dir, path, end)
		if err != nil {
			return nil, "", fmt.Errorf("journal: repair %s: %w", d.dir, err)
		}
		view.cuts[path] = end
		d.log.Warn("journal: repair: cut a damaged write-ahead log at its last intact record; events after it are lost",
			"dir", d.dir, "wal", d.fs.PathBase(path), "kept_bytes", end, "size", size, "copy", backup)
	}
	return nil, "", fmt.Errorf("journal: open %s: more than %d damaged write-ahead logs: %s", d.dir, maxWALRepairs, strings.Join(notes, "; "))
}

var walFailure = regexp.MustCompile(`^replaying wal (\d+), offset \((.*): \d+\)`)

// walReplayFailure finds, in Pebble's error, the write-ahead log it could
// not replay (the error carries "replaying wal N, offset (path: off)").
func walReplayFailure(err error) (num uint64, path string, ok bool) {
	if !pebble.IsCorruptionError(err) {
		return 0, "", false
	}
	for _, detail := range cerrors.GetAllDetails(err) {
		if m := walFailure.FindStringSubmatch(detail); m != nil {
			n, perr := strconv.ParseUint(m[1], 10, 64)
			return n, m[2], perr == nil
		}
	}
	return 0, "", false
}

// intactWALPrefix reads a write-ahead log the way Pebble replays it and
// returns the length of its intact prefix: the offset of the first record
// that fails.
func intactWALPrefix(fs vfs.FS, path string, num uint64) (end, size int64, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	r := newWALReader(f, num, record.NewReader)
	for {
		end = r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		switch {
		case err == nil:
		case errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk) ||
			errors.Is(err, record.ErrUnexpectedEOF): // the store refused it: not the end of the last log
			return end, st.Size(), nil
		case errors.Is(err, io.EOF):
			return 0, 0, errors.New("the log reads to its end")
		default:
			return 0, 0, err
		}
	}
}

// newWALReader calls record.NewReader, whose file number type is internal
// to Pebble (N is inferred from newReader).
func newWALReader[N ~uint64](f io.Reader, num uint64, newReader func(io.Reader, N) *record.Reader) *record.Reader {
	return newReader(f, N(num))
}

// cutWAL keeps a copy of the log at path and cuts the log at end: it
// writes the intact prefix to a temporary file and renames it over the log.
func cutWAL(fs vfs.FS, dir, path string, end int64) (backup string, err error) {
	backup = fs.PathJoin(dir, damagedPrefix+fs.PathBase(path))
	for i := 1; ; i++ {
		if _, err := fs.Stat(backup); isNotExist(err) {
			break
		}
		backup = fs.PathJoin(dir, fmt.Sprintf("%s%s.%d", damagedPrefix, fs.PathBase(path), i))
	}
	if err := copyFile(fs, path, backup, -1); err != nil {
		return "", err
	}
	tmp := path + ".cut"
	if err := copyFile(fs, path, tmp, end); err != nil {
		return "", err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return "", err
	}
	return backup, syncDir(fs, dir)
}

// copyFile copies the first n bytes of src (all with n < 0) to a new file
// dst, and fsyncs it.
func copyFile(fs vfs.FS, src, dst string, n int64) error {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	_, err = io.Copy(out, r)
	return errors.Join(err, out.Sync(), out.Close())
}

// cutFS shows files cut at a size (path -> size): a read-only view for
// Pebble.
type cutFS struct {
	vfs.FS
	cuts map[string]int64
}

func (fs cutFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	size, cut := fs.cuts[name]
	if err != nil || !cut {
		return f, err
	}
	return &cutFile{File: f, size: size}, nil
}

func (fs cutFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := fs.FS.Stat(name)
	size, cut := fs.cuts[name]
	if err != nil || !cut {
		return fi, err
	}
	return cutInfo{FileInfo: fi, size: size}, nil
}

type cutFile struct {
	vfs.File
	size, off int64
}

func (f *cutFile) Read(p []byte) (int, error) {
	if f.off >= f.size {
		return 0, io.EOF
	}
	n, err := f.File.Read(p[:min(int64(len(p)), f.size-f.off)])
	f.off += int64(n)
	return n, err
}

func (f *cutFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	n, err := f.File.ReadAt(p[:min(int64(len(p)), f.size-off)], off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

func (f *cutFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return fi, err
	}
	return cutInfo{FileInfo: fi, size: f.size}, nil
}

type cutInfo struct {
	vfs.FileInfo
	size int64
}

func (i cutInfo) Size() int64 { return i.size }

// sessionCheck is what Open found of one session.
type sessionCheck struct {
	s       *durSession
	last    uint64 // seq of the last stored event, 0 if none
	problem string // what is wrong with the stored records, "" if nothing
	intact  uint64 // with a problem: the last seq before it
	gaps    []span
}

// recover is Open's work once the store is open; see the file comment.
// format is the marker's (0: a new journal). walDamage describes a
// write-ahead log the store could not replay; the store is then a
// read-only view unless repair.
func (d *Durable) recover(format int, repair bool, walDamage string) error {
	var files []string
	if walDamage != "" {
		files = append(files, walDamage)
	}
	hw, marks, err := d.readMarks(format)
	if err != nil {
		return err
	}
	files = append(files, marks...)
	if format == 1 {
		if err := readHeads(d.fs, d.dir, hw.entries); err != nil {
			files = append(files, err.Error())
		}
	}

	// The clock only measures how long Open's scans take, for the log.
	began := time.Now()
	var mig *migration
	if format == 1 {
		mig = newMigration()
	}
	// Without a usable high-water mark log (or migrating), every session
	// is loaded and checked; with one, only those it names (idle.go).
	checks, verified, err := d.loadSessions(hw.entries, mig, mig != nil || len(files) > 0)
	if err != nil {
		return storeError("load", d.dir, err)
	}
	damaged := d.damaged(checks, hw.entries)
	if regress.TrustDamagedJournal.Load() {
		damaged, files = nil, nil
	}
	if len(damaged) > 0 || len(files) > 0 {
		if !repair {
			return &DamageError{Dir: d.dir, Sessions: damaged, Files: files}
		}
		for _, f := range files {
			d.log.Warn("journal: repair: "+f, "dir", d.dir)
		}
	}
	if repair && !hw.intact && !regress.TrustDamagedMarks.Load() {
		damaged = d.raiseToFloor(checks, damaged, hw)
	}
	d.log.Info("journal: verified the events stored since the previous open", "dir", d.dir,
		"sessions", len(checks), "events", verified, "duration", time.Since(began).Round(time.Millisecond))
	if mig != nil {
		began := time.Now()
		if err := d.writeMigration(mig); err != nil {
			return storeError("migrate", d.dir, err)
		}
		d.log.Info("journal: migrated a format-1 journal: built the run catalogue from one scan", "dir", d.dir,
			"runs", len(mig.order), "duration", time.Since(began).Round(time.Millisecond))
	}
	if len(damaged) > 0 {
		if err := d.repair(checks, damaged, hw); err != nil {
			return storeError("repair", d.dir, err)
		}
	}
	if err := d.loadCatalog(); err != nil {
		return storeError("load", d.dir, err)
	}
	for _, c := range checks {
		s := c.s
		s.acked, s.verified = s.head.Load(), c.last
		if e := hw.entries[s.id]; e != nil {
			s.reserved = e.reserved
		}
		s.reserved = max(s.reserved, hw.floors[s.id], s.acked+reserveAhead)
	}
	if err := d.rewriteHWM(); err != nil {
		return err
	}
	// A new journal, or a migrated one, becomes format 2 once its store,
	// catalogue and high-water mark log are complete.
	if format != 2 {
		if err := writeMarker(d.fs, d.dir, markerText2); err != nil {
			return err
		}
	}
	if format == 1 {
		if err := d.fs.Remove(d.fs.PathJoin(d.dir, headsFile)); err != nil && !isNotExist(err) {
			return fmt.Errorf("journal: %s: remove %s: %w", d.dir, headsFile, err)
		}
	}
	return nil
}

// blindJump is how far a repair that has neither mark log intact moves
// every stored session's head. The events such a loss can take are those
// of the write-ahead logs not yet flushed to tables: at most
// MemTableStopWritesThreshold memtables (4 x 64 MiB by default), fewer
// events than bytes, so far below 2^32; seqs are uint64.
const blindJump = 1 << 32

// marks is what the high-water mark log and the floor log say together.
type marks struct {
	// entries merges the intact frames of both logs (the highest marks).
	entries map[messages.SessionID]*hwmEntry
	// intact: the high-water mark log was read whole (or the journal is
	// new, or a format-1 one with its heads file): its heads are every
	// seq acknowledged, and a loss is found by comparing them.
	intact bool
	// reserved: one log was read whole, so its reservations bound every
	// seq handed out (no seq above a reservation is acknowledged).
	reserved bool
	// floors are the heads raiseToFloor chose for a repair.
	floors map[messages.SessionID]uint64
}

// readMarks reads both mark logs and says what is wrong with them (for a
// *DamageError). A missing or damaged log is never read as "nothing was
// acknowledged": only a journal that is new (format 0) or predates the
// log (format 1) may lack it, and only one written before the floor log
// existed (a version-1 high-water mark log) may lack that.
func (d *Durable) readMarks(format int) (marks, []string, error) {
	m := marks{entries: map[messages.SessionID]*hwmEntry{}, floors: map[messages.SessionID]uint64{}}
	var notes []string
	hw, hwErr := readHWM(d.fs, d.dir, hwmFile)
	fl, flErr := readHWM(d.fs, d.dir, floorFile)
	if regress.TrustDamagedMarks.Load() {
		fl, flErr = hwmRead{}, nil
		if errors.Is(hwErr, errHWMDamaged) {
			hwErr = nil
		}
	}
	for _, f := range []struct {
		name string
		r    hwmRead
		err  error
	}{{hwmFile, hw, hwErr}, {floorFile, fl, flErr}} {
		switch {
		case f.err == nil:
			if f.name == hwmFile {
				m.intact = true
			}
			m.reserved = true
			if f.r.tornAt >= 0 {
				d.log.Warn("journal: ignored the unsynced end of a mark log (a crash while writing it)",
					"dir", d.dir, "file", f.name, "bytes", f.r.size-f.r.tornAt)
			}
		case isNotExist(f.err):
			switch {
			case format != 2:
				// A new journal, or a format-1 one (its heads file).
				m.intact = m.intact || f.name == hwmFile
			case f.name == floorFile && hwErr == nil && hw.version == 1:
				// Written before the floor log existed; this Open writes it.
			default:
				notes = append(notes, f.name+" is missing: the journal cannot tell whether acknowledged events were lost")
			}
		case errors.Is(f.err, errHWMDamaged):
			notes = append(notes, fmt.Sprintf("%s is %v", f.name, f.err))
		default:
			return m, nil, fmt.Errorf("journal: %s: read %s: %w", d.dir, f.name, f.err)
		}
		for id, e := range f.r.entries {
			have := m.entries[id]
			if have == nil {
				m.entries[id] = e
				continue
			}
			have.head, have.reserved, have.verified = max(have.head, e.head), max(have.reserved, e.reserved), max(have.verified, e.verified)
		}
	}
	if !m.intact {
		// What verified says cannot be trusted to cover what was lost.
		for _, e := range m.entries {
			e.verified = 0
		}
	}
	return m, notes, nil
}

// raiseToFloor is a repair's answer to a high-water mark log that is
// missing or damaged: it cannot tell what was acknowledged, so every
// session's next seq goes above anything that may have been: its
// reservation in an intact log, else the highest mark left in either log
// and its stored head plus blindJump. It adds each session it raises to
// damaged (nothing of them is deleted) and returns the list.
func (d *Durable) raiseToFloor(checks map[messages.SessionID]*sessionCheck, damaged []DamagedSession, m marks) []DamagedSession {
	for id, e := range m.entries {
		m.floors[id] = max(e.head, e.reserved)
	}
	if !m.reserved {
		for id, c := range checks {
			m.floors[id] = max(m.floors[id], max(c.s.head.Load(), c.last)+blindJump)
		}
		d.log.Warn("journal: repair: neither mark log is intact: every stored session's next seq jumps; a session whose every event was in a lost write-ahead log cannot be protected",
			"dir", d.dir, "jump", uint64(blindJump))
	}
	listed := map[messages.SessionID]bool{}
	for _, dmg := range damaged {
		listed[dmg.Session] = true
	}
	for id, floor := range m.floors {
		var head uint64
		if c := checks[id]; c != nil {
			head = max(c.s.head.Load(), c.last)
		}
		if listed[id] || floor <= head {
			continue
		}
		damaged = append(damaged, DamagedSession{Session: id, LastIntact: head, Acknowledged: head,
			Detail: fmt.Sprintf("the high-water mark log is not intact: seqs up to %d may have been acknowledged", floor)})
	}
	slices.SortFunc(damaged, func(a, b DamagedSession) int { return cmpSession(a.Session, b.Session) })
	return damaged
}

// loadSessions builds every session's state from the store, verifying the
// records stored since the previous Open (all of them with mig, which sees
// each intact record). It returns how many records it verified.
func (d *Durable) loadSessions(hw map[messages.SessionID]*hwmEntry, mig *migration, all bool) (map[messages.SessionID]*sessionCheck, int, error) {
	checks := map[messages.SessionID]*sessionCheck{}
	// A session the high-water mark log does not name left memory idle,
	// its events in the tables (idle.go): it stays in the store.
	stored := func(id messages.SessionID) bool { return !all && hw[id] == nil }
	state := func(id messages.SessionID) *sessionCheck {
		c := checks[id]
		if c == nil {
			c = &sessionCheck{s: newDurSession(id)}
			checks[id] = c
			d.sessions[id] = c.s
		}
		return c
	}
	// Trim and repair records.
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyMeta}, UpperBound: []byte{keyMeta + 1}})
	if err != nil {
		return nil, 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		id, err := parseMetaKey(it.Key())
		if err != nil {
			_ = it.Close()
			return nil, 0, err
		}
		if stored(id) {
			continue
		}
		first, head, gaps, err := parseMeta(it.Key(), it.Value())
		if err != nil {
			_ = it.Close()
			return nil, 0, corruptf("session %s: trim record: %v", id, err)
		}
		c := state(id)
		c.s.first.Store(max(first, 1))
		c.s.head.Store(head)
		c.gaps = gaps
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, 0, err
	}

	// Events.
	it, err = d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyEvent}, UpperBound: []byte{keyEvent + 1}})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	verified := 0
	for ok := it.First(); ok; {
		id, prefix, _, err := parseEventKey(it.Key())
		if err != nil {
			return nil, 0, err
		}
		if stored(id) {
			ok = it.SeekGE(prefixEnd(prefix))
			continue
		}
		c := state(id)
		var from uint64
		if e := hw[id]; e != nil && mig == nil {
			from = e.verified
		}
		var n int
		if ok, n, err = d.verifySession(it, c, slices.Clone(prefix), from, mig); err != nil {
			return nil, 0, err
		}
		verified += n
	}
	if err := it.Error(); err != nil {
		return nil, 0, err
	}
	for _, c := range checks {
		s := c.s
		head := max(s.head.Load(), c.last)
		s.head.Store(head)
		first, gaps := normalizeGaps(s.first.Load(), c.gaps)
		// The trim record's head may be above the last stored event: only
		// over a range lost to a repair, or when everything was trimmed.
		if last := max(c.last, first-1); c.problem == "" && last < head && !skippable(first, gaps, last+1, head) {
			c.problem, c.intact = fmt.Sprintf("events %d..%d are missing", last+1, head), last
		}
		first = min(first, head+1)
		s.first.Store(first)
		s.gaps.Store(&gaps)
	}
	return checks, verified, nil
}

// verifySession verifies one session's records from seq from (or its
// first) to its last, the iterator standing on its first key. It leaves
// the iterator on the next session's first key (ok) or exhausted.
func (d *Durable) verifySession(it *pebble.Iterator, c *sessionCheck, prefix []byte, from uint64, mig *migration) (ok bool, n int, err error) {
	s := c.s
	first := s.first.Load()
	end := prefixEnd(prefix)
	want := max(first, from)
	if want > binary.BigEndian.Uint64(it.Key()[len(prefix):]) {
		// Start at the record verified last time (it seeds the chain), or
		// at the last one if the store ends before it.
		if !it.SeekGE(eventKey(nil, prefix, want)) || !bytes.HasPrefix(it.Key(), prefix) {
			if !it.SeekLT(eventKey(nil, prefix, want)) {
				return false, 0, errors.Join(it.Error(), corruptf("session %s: lost its position", s.id))
			}
			want = binary.BigEndian.Uint64(it.Key()[len(prefix):])
		}
	}
	start := want
	var prevSeq uint64
	var prevSum uint32
	fail := func(seq uint64, detail string) (bool, int, error) {
		c.problem = fmt.Sprintf("seq %d: %s", seq, detail)
		c.intact = start - 1
		if prevSeq != 0 {
			c.intact = prevSeq
		}
		if it.SeekLT(end) {
			c.last = binary.BigEndian.Uint64(it.Key()[len(prefix):])
		}
		return it.SeekGE(end), n, it.Error()
	}
	for ok = true; ok; ok = it.Next() {
		k := it.Key()
		if !bytes.HasPrefix(k, prefix) {
			break
		}
		if len(k) != len(prefix)+8 {
			return fail(want, fmt.Sprintf("bad key %x", k))
		}
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		if seq != want && !skippable(first, c.gaps, want, seq-1) {
			return fail(want, fmt.Sprintf("missing (the next stored seq is %d)", seq))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			if pebble.IsCorruptionError(err) {
				return fail(seq, err.Error())
			}
			return false, n, err
		}
		rec, err := decodeRecord(k, v)
		if err != nil {
			return fail(seq, err.Error())
		}
		if rec.format == valueFormat2 && (prevSeq != 0 && seq == prevSeq+1 && rec.prev != prevSum || seq == 1 && rec.prev != 0) {
			return fail(seq, "chain broken: the record before it is not the one it was written after")
		}
		if mig != nil {
			mig.visit(s.id, seq, rec)
		}
		prevSeq, prevSum, want = seq, rec.sum, seq+1
		n++
	}
	c.last = prevSeq
	s.lastSum = prevSum
	return ok, n, it.Error()
}

// skippable reports whether seqs a..b may be absent from the store:
// trimmed, or lost to a repair.
func skippable(first uint64, gaps []span, a, b uint64) bool {
	if b < first {
		return true
	}
	a = max(a, first)
	for _, g := range gaps {
		if g.from <= a && b <= g.to {
			return true
		}
	}
	return false
}

// damaged compares the sessions with the high-water mark log and lists the
// damaged ones, by session.
func (d *Durable) damaged(checks map[messages.SessionID]*sessionCheck, hw map[messages.SessionID]*hwmEntry) []DamagedSession {
	var out []DamagedSession
	for id, e := range hw {
		if e.head > 0 && checks[id] == nil {
			out = append(out, DamagedSession{Session: id, Acknowledged: e.head, Detail: "no event of it is stored"})
		}
	}
	for id, c := range checks {
		head := c.s.head.Load()
		var acked uint64
		if e := hw[id]; e != nil {
			acked = e.head
		}
		switch {
		case c.problem != "":
			out = append(out, DamagedSession{Session: id, LastIntact: c.intact, Acknowledged: max(acked, head), Detail: c.problem})
		case head < acked:
			out = append(out, DamagedSession{Session: id, LastIntact: head, Acknowledged: acked,
				Detail: fmt.Sprintf("the store ends at seq %d", head)})
		}
	}
	slices.SortFunc(out, func(a, b DamagedSession) int { return cmpSession(a.Session, b.Session) })
	return out
}

func cmpSession(a, b messages.SessionID) int {
	return bytes.Compare([]byte(a), []byte(b))
}

// repair truncates each damaged session to its last intact event, sets its
// head to the highest seq it acknowledged or reserved (or to its floor,
// when the marks are not intact), and fixes the catalogue, in one synced
// batch.
func (d *Durable) repair(checks map[messages.SessionID]*sessionCheck, damaged []DamagedSession, hw marks) error {
	b := d.db.NewBatch()
	defer b.Close()
	truncated := map[messages.SessionID]uint64{}
	for _, dmg := range damaged {
		c := checks[dmg.Session]
		if c == nil {
			c = &sessionCheck{s: newDurSession(dmg.Session)}
			checks[dmg.Session] = c
			d.sessions[dmg.Session] = c.s
		}
		s := c.s
		head := max(dmg.Acknowledged, s.head.Load(), hw.floors[s.id])
		if e := hw.entries[s.id]; e != nil {
			head = max(head, e.reserved)
		}
		gaps := *s.gaps.Load()
		if dmg.LastIntact < head {
			gaps = append(slices.Clone(gaps), span{dmg.LastIntact + 1, head})
		}
		first, gaps := normalizeGaps(s.first.Load(), gaps)
		err := errors.Join(
			b.DeleteRange(eventKey(nil, s.prefix, dmg.LastIntact+1), prefixEnd(s.prefix), nil),
			setMeta(b, s.id, first, head, gaps),
		)
		if err != nil {
			return err
		}
		s.first.Store(first)
		s.head.Store(head)
		s.gaps.Store(&gaps)
		s.lastSum = 0 // the next record follows a gap: no chain across it
		c.last = min(c.last, dmg.LastIntact)
		truncated[s.id] = dmg.LastIntact
		d.log.Warn("journal: repair: truncated a damaged session; acknowledged events are lost",
			"dir", d.dir, "session", s.id, "lost_from", dmg.LastIntact+1, "lost_to", dmg.Acknowledged,
			"last_intact", dmg.LastIntact, "next_seq", head+1, "detail", dmg.Detail)
	}
	removed, revived, err := d.repairCatalog(b, truncated)
	if err != nil {
		return err
	}
	if removed+revived > 0 {
		d.log.Warn("journal: repair: made the run catalogue match the surviving events",
			"dir", d.dir, "runs_removed", removed, "runs_live_again", revived)
	}
	return b.Commit(pebble.Sync)
}

// readHeads merges format 1's heads file (if any) into entries.
func readHeads(fs vfs.FS, dir string, entries map[messages.SessionID]*hwmEntry) error {
	f, err := fs.Open(fs.PathJoin(dir, headsFile))
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(f, hwmMaxFile))
	_ = f.Close()
	if err != nil {
		return err
	}
	damaged := fmt.Errorf("%s is damaged", headsFile)
	if len(b) < len(headsFormat)+4 || string(b[:len(headsFormat)]) != headsFormat ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return damaged
	}
	for r := b[len(headsFormat) : len(b)-4]; len(r) > 0; {
		id, rest, ok := cutUvarintBytes(r)
		if !ok {
			return damaged
		}
		h, w := binary.Uvarint(rest)
		if w <= 0 {
			return damaged
		}
		r = rest[w:]
		e := entries[messages.SessionID(id)]
		if e == nil {
			e = &hwmEntry{id: messages.SessionID(id)}
			entries[e.id] = e
		}
		e.head = max(e.head, h)
	}
	return nil
}
