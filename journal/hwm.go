package journal

// The high-water mark log (hwmFile): what the journal acknowledged, kept
// beside the store so that Open can tell when the store lost events that
// were acknowledged (a truncated, garbled or deleted write-ahead log makes
// Pebble replay less, silently), and so that no seq is ever handed out
// twice, whatever the disk did.
//
// The committer appends to it after every group commit (a plain write, no
// fsync: the page cache keeps it through a kill -9) a heads frame with the
// new head of each session of the group. Before it acknowledges a seq above
// a session's reservation it appends a reservation frame (every session of
// the group that needs one, in one frame) and fsyncs the file, so the
// reservation survives a machine crash too. Open and Close rewrite the file
// compactly (a snapshot: temporary file, fsync, rename, directory fsync),
// and so does the committer when the file has grown past hwmCompactBytes.
//
// File format: frames, each
//
//	magic(2) kind(1) len(4, big endian) crc(4, CRC-32C of kind, len and payload) payload(len)
//
// kinds: 'v' version (first frame, payload hwmVersion); 's' snapshot,
// 'r' reservation, 'h' heads; payloads are lists of uvarint(len(session))
// session followed by uvarints: head reserved verified ('s'), reserved
// ('r'), head ('h'). 'v', 's' and 'r' frames are fsynced when written;
// 'h' frames are not.
//
// Version 2's version frame also holds the length of the snapshot the file
// was written with (8 bytes, big endian, after the version text).
//
// Reading it: a frame that fails its checksum or is cut short is damage,
// unless it lies after the last fsynced frame and after the snapshot. That
// tail was never synced: a machine crash may lose it, or leave garbage in
// it, so it is ignored (with a warning) and what precedes it is used.
// Heads lost that way only weaken the detection of a later loss;
// reservations are never lost. The snapshot is written whole and fsynced
// before it is renamed into place, so a bad byte in it (or a file shorter
// than it) is damage even when no synced frame follows: a flipped bit in
// the last snapshot frame must not pass for a torn tail (version 1 files
// carry no length and cannot tell the two apart).
//
// The floor log (floorFile) is a second copy of the same records without
// the heads: the snapshots and the reservation frames, written and fsynced
// with those of the high-water mark log. No seq above a session's
// reservation is acknowledged, so either file alone, intact, tells a
// repair which seqs may have been handed out; a repair that has neither
// jumps every stored session by blindJump (check.go).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

const (
	hwmFile    = "CONCLAVE-JOURNAL-HWM"
	hwmTemp    = hwmFile + ".tmp"
	hwmVersion = "conclave journal hwm 1"
	// hwmVersion2 is followed by the snapshot's length (8 bytes).
	hwmVersion2 = "conclave journal hwm 2"
	floorFile   = "CONCLAVE-JOURNAL-FLOOR"
	floorTemp   = floorFile + ".tmp"

	hwmMagic0, hwmMagic1 byte = 0xC7, 0x4A
	hwmFrameHeader            = 11

	frameVersion  byte = 'v'
	frameSnapshot byte = 's'
	frameReserve  byte = 'r'
	frameHeads    byte = 'h'

	// hwmMaxFrame bounds one frame's payload. A heads or reservation frame
	// holds at most commitQueue sessions of at most maxSessionLen bytes;
	// snapshots are cut into frames of hwmSnapshotChunk.
	hwmMaxFrame      = 4 << 20
	hwmSnapshotChunk = 1 << 20
	// hwmCompactBytes: the committer rewrites the file when it has grown
	// past this and past twice its last snapshot (one rewrite, one fsync,
	// every ~15 s at 850k events/s).
	hwmCompactBytes = 4 << 20
	// hwmMaxFile bounds what Open reads: hwmCompactBytes plus a group's
	// frames, or a snapshot of about a million sessions.
	hwmMaxFile = 256 << 20

	// reserveAhead is how far beyond a session's head a reservation
	// reaches. A repair sets the head to the reservation, so that is how
	// many seqs a repair may skip: free in a uint64 seq space, and clients
	// get one replay_truncated for the whole jump. In exchange a session
	// needs a reservation fsync once per 65,536 events (once per ~55 ms at
	// 1.2M events/s on one session, ~1% of its commits), besides the
	// first append of a session created since the last Open.
	reserveAhead = 1 << 16
)

// hwmEntry is what the high-water mark log knows of one session.
type hwmEntry struct {
	id       messages.SessionID
	head     uint64 // highest seq acknowledged
	reserved uint64 // no seq up to this one may be handed out again
	verified uint64 // the store's records up to this seq were read back and verified
}

// errHWMDamaged marks a high-water mark log that is damaged before its last
// fsynced frame.
var errHWMDamaged = errors.New("damaged")

// hwmRead is what readHWM found.
type hwmRead struct {
	entries map[messages.SessionID]*hwmEntry
	// tornAt is the offset of an unsynced tail that was ignored, -1 if none.
	tornAt, size int64
	// snapshot is the length of the snapshot the file starts with, 0 if
	// the file does not say (version 1).
	snapshot int64
	version  int
}

// readHWM reads the log name (hwmFile or floorFile) in dir. A missing file
// is an error matching os.ErrNotExist. A damaged file is an error matching
// errHWMDamaged; the hwmRead then holds what its intact frames say.
func readHWM(fs vfs.FS, dir, name string) (hwmRead, error) {
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		return hwmRead{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, hwmMaxFile+1))
	if err != nil {
		return hwmRead{}, err
	}
	if len(b) > hwmMaxFile {
		return hwmRead{}, fmt.Errorf("%s is larger than %d bytes", name, hwmMaxFile)
	}
	return parseHWM(b)
}

// parseHWM decodes a high-water mark log; see the file comment for what is
// damage and what is an ignorable tail. It reads every intact frame, even
// of a damaged log: what they say is still true, and a repair uses it.
func parseHWM(b []byte) (hwmRead, error) {
	r := hwmRead{entries: map[messages.SessionID]*hwmEntry{}, tornAt: -1, size: int64(len(b))}
	if len(b) == 0 {
		return r, fmt.Errorf("%w: empty", errHWMDamaged)
	}
	var damage error
	damaged := func(err error) {
		if damage == nil {
			damage = err
		}
	}
	bad := -1 // offset of the first bad byte range, -1 if none yet
	for off := 0; off < len(b); {
		kind, payload, n, ok := parseFrame(b[off:])
		if !ok || off == 0 && kind != frameVersion {
			if off == 0 {
				damaged(fmt.Errorf("%w: no version frame at its start", errHWMDamaged))
			}
			if bad < 0 {
				bad = off
			}
			// Resynchronise on the next magic; a false match fails its checksum.
			i := bytes.Index(b[off+1:], []byte{hwmMagic0, hwmMagic1})
			if i < 0 {
				break
			}
			off += 1 + i
			continue
		}
		if kind != frameHeads && bad >= 0 {
			damaged(fmt.Errorf("%w at byte %d (before a synced record at byte %d)", errHWMDamaged, bad, off))
		}
		if err := r.apply(kind, payload, off); err != nil {
			damaged(fmt.Errorf("%w: record at byte %d: %w", errHWMDamaged, off, err))
		}
		off += n
	}
	switch {
	case r.version == 0:
		damaged(fmt.Errorf("%w: no version frame", errHWMDamaged))
	case int64(len(b)) < r.snapshot:
		damaged(fmt.Errorf("%w: cut at byte %d, inside its snapshot of %d bytes", errHWMDamaged, len(b), r.snapshot))
	case bad >= 0 && int64(bad) < r.snapshot:
		damaged(fmt.Errorf("%w at byte %d, inside its snapshot of %d bytes (written whole and synced)", errHWMDamaged, bad, r.snapshot))
	}
	if bad >= 0 {
		r.tornAt = int64(bad)
	}
	return r, damage
}

// parseFrame decodes the frame at the start of b.
func parseFrame(b []byte) (kind byte, payload []byte, n int, ok bool) {
	if len(b) < hwmFrameHeader || b[0] != hwmMagic0 || b[1] != hwmMagic1 {
		return 0, nil, 0, false
	}
	l := binary.BigEndian.Uint32(b[3:])
	if l > hwmMaxFrame || uint64(len(b)-hwmFrameHeader) < uint64(l) {
		return 0, nil, 0, false
	}
	n = hwmFrameHeader + int(l)
	sum := crc32.Update(crc32.Checksum(b[2:7], castagnoli), castagnoli, b[hwmFrameHeader:n])
	if sum != binary.BigEndian.Uint32(b[7:]) {
		return 0, nil, 0, false
	}
	return b[2], b[hwmFrameHeader:n], n, true
}

func (r *hwmRead) apply(kind byte, p []byte, off int) error {
	if kind == frameVersion {
		switch {
		case off != 0:
			return errors.New("a version frame after the start")
		case string(p) == hwmVersion:
			r.version = 1
		case len(p) == len(hwmVersion2)+8 && string(p[:len(hwmVersion2)]) == hwmVersion2:
			r.version, r.snapshot = 2, int64(binary.BigEndian.Uint64(p[len(hwmVersion2):]))
		default:
			return fmt.Errorf("unknown version %q", p)
		}
		return nil
	}
	var fields int
	switch kind {
	case frameSnapshot:
		fields = 3
	case frameReserve, frameHeads:
		fields = 1
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	for len(p) > 0 {
		id, rest, ok := cutUvarintBytes(p)
		if !ok {
			return errBadRecord
		}
		p = rest
		var v [3]uint64
		for i := range fields {
			x, w := binary.Uvarint(p)
			if w <= 0 {
				return errBadRecord
			}
			v[i], p = x, p[w:]
		}
		e := r.entries[messages.SessionID(id)]
		if e == nil {
			e = &hwmEntry{id: messages.SessionID(id)}
			r.entries[e.id] = e
		}
		switch kind {
		case frameSnapshot:
			e.head, e.reserved, e.verified = max(e.head, v[0]), max(e.reserved, v[1]), max(e.verified, v[2])
		case frameReserve:
			e.reserved = max(e.reserved, v[0])
		case frameHeads:
			e.head = max(e.head, v[0])
		}
	}
	return nil
}

// appendFrame appends a frame of kind holding entries to dst.
func appendFrame(dst []byte, kind byte, entries []hwmEntry) []byte {
	start := len(dst)
	dst = append(dst, hwmMagic0, hwmMagic1, kind, 0, 0, 0, 0, 0, 0, 0, 0)
	for _, e := range entries {
		dst = appendUvarintBytes(dst, string(e.id))
		switch kind {
		case frameSnapshot:
			dst = binary.AppendUvarint(dst, e.head)
			dst = binary.AppendUvarint(dst, e.reserved)
			dst = binary.AppendUvarint(dst, e.verified)
		case frameReserve:
			dst = binary.AppendUvarint(dst, e.reserved)
		case frameHeads:
			dst = binary.AppendUvarint(dst, e.head)
		}
	}
	return sealFrame(dst, start)
}

// sealFrame fills in the length and checksum of the frame at dst[start:].
func sealFrame(dst []byte, start int) []byte {
	f := dst[start:]
	binary.BigEndian.PutUint32(f[3:], uint32(len(f)-hwmFrameHeader))
	sum := crc32.Update(crc32.Checksum(f[2:7], castagnoli), castagnoli, f[hwmFrameHeader:])
	binary.BigEndian.PutUint32(f[7:], sum)
	return dst
}

// hwmLog appends to the high-water mark log or the floor log. Only one
// goroutine uses it at a time: Open, then the committer, then Close.
type hwmLog struct {
	fs   vfs.FS
	dir  string
	name string
	f    vfs.File
	size int64 // bytes in the file
	base int64 // bytes of its last snapshot
	buf  []byte
}

// writeHWM replaces the log name (hwmFile or floorFile) in dir with a
// snapshot of entries (atomically) and returns it open for appending.
func writeHWM(fs vfs.FS, dir, name string, entries []hwmEntry) (*hwmLog, error) {
	slices.SortFunc(entries, func(a, b hwmEntry) int { return cmp.Compare(a.id, b.id) })
	b := sealFrame(append(append([]byte{hwmMagic0, hwmMagic1, frameVersion, 0, 0, 0, 0, 0, 0, 0, 0}, hwmVersion2...), 0, 0, 0, 0, 0, 0, 0, 0), 0)
	for len(entries) > 0 {
		n, size := 0, 0
		for n < len(entries) && (n == 0 || size < hwmSnapshotChunk) {
			size += len(entries[n].id) + 3*binary.MaxVarintLen64
			n++
		}
		b = appendFrame(b, frameSnapshot, entries[:n])
		entries = entries[n:]
	}
	// The snapshot's length goes into the version frame.
	vlen := hwmFrameHeader + len(hwmVersion2) + 8
	binary.BigEndian.PutUint64(b[vlen-8:], uint64(len(b)))
	sealFrame(b[:vlen], 0) // in place
	tmp := fs.PathJoin(dir, name+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("journal: %s: write %s: %w", dir, name, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(dir, name))
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %s: write %s: %w", dir, name, err)
	}
	return &hwmLog{fs: fs, dir: dir, name: name, f: f, size: int64(len(b)), base: int64(len(b))}, nil
}

// heads appends a heads frame (no fsync).
func (h *hwmLog) heads(entries []hwmEntry) error { return h.append(frameHeads, entries, false) }

// reserve appends a reservation frame and fsyncs it.
func (h *hwmLog) reserve(entries []hwmEntry) error { return h.append(frameReserve, entries, true) }

// reserveBoth appends a reservation frame to the high-water mark log h and
// to the floor log fl, and fsyncs both at once: the floor's fsync runs on a
// goroutine that reserveBoth waits for, so a reservation costs about one
// fsync, not two (on ext4 the second joins the first's journal commit).
func reserveBoth(h, fl *hwmLog, entries []hwmEntry) error {
	if err := h.append(frameReserve, entries, false); err != nil {
		return err
	}
	if err := fl.append(frameReserve, entries, false); err != nil {
		return err
	}
	var g routine.Group
	var flErr error
	g.Go(func() { flErr = fl.sync() })
	err := h.sync()
	_ = g.Wait(context.Background()) // never cancelled: returns when the fsync does
	return errors.Join(err, flErr)
}

// sync fsyncs the log.
func (h *hwmLog) sync() error {
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", h.name, err)
	}
	return nil
}

func (h *hwmLog) append(kind byte, entries []hwmEntry, sync bool) error {
	h.buf = appendFrame(h.buf[:0], kind, entries)
	n, err := h.f.Write(h.buf)
	h.size += int64(n)
	if err == nil && sync {
		err = h.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", h.name, err)
	}
	return nil
}

// grown reports whether the log should be rewritten.
func (h *hwmLog) grown() bool { return h.size > max(hwmCompactBytes, 2*h.base) }

// Close closes the file (everything that must be synced already is).
func (h *hwmLog) Close() error { return h.f.Close() }

func syncDir(fs vfs.FS, dir string) error {
	df, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(df.Sync(), df.Close())
}

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
