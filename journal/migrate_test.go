package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/messages"
)

// writeFormat1 writes a journal the way the format-1 code did (the code
// before checksums and the catalogue): format-1 values, 16-byte trim
// records, the heads file and marker 1. heads may claim more than the
// store holds.
func writeFormat1(t *testing.T, dir string, sessions map[messages.SessionID][]*messages.Encoded, trims map[messages.SessionID]uint64, heads map[messages.SessionID]uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatTableFormatV6})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for s, evs := range sessions {
		prefix := sessionKey(keyEvent, s)
		for _, e := range evs {
			if e.Seq < trims[s] {
				continue
			}
			v := []byte{valueFormat1}
			v = appendUvarintBytes(v, string(e.Type))
			v = appendUvarintBytes(v, string(e.RunID))
			v = append(v, e.JSON...)
			if err := b.Set(eventKey(nil, prefix, e.Seq), v, nil); err != nil {
				t.Fatal(err)
			}
		}
		if first, ok := trims[s]; ok {
			var meta [16]byte
			binary.BigEndian.PutUint64(meta[:], first)
			binary.BigEndian.PutUint64(meta[8:], evs[len(evs)-1].Seq)
			if err := b.Set(sessionKey(keyMeta, s), meta[:], nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	hb := []byte(headsFormat)
	for s, h := range heads {
		hb = appendUvarintBytes(hb, string(s))
		hb = binary.AppendUvarint(hb, h)
	}
	hb = binary.BigEndian.AppendUint32(hb, crc32.Checksum(hb, castagnoli))
	if err := os.WriteFile(filepath.Join(dir, headsFile), hb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(markerText1), 0o644); err != nil {
		t.Fatal(err)
	}
}

var t1 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func oldEvent(seq uint64, typ messages.EventType, run messages.RunID, at time.Duration) *messages.Encoded {
	return messages.NewEncoded(seq, typ, run, fmt.Appendf(nil, `{"id":"x","seq":%d,"type":%q,"timestamp":%q}`, seq, typ, t1.Add(at).Format(time.RFC3339Nano)))
}

func TestOpen_MigratesFormat1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sessions := map[messages.SessionID][]*messages.Encoded{
		// Run b2 starts first (by time) although its session sorts last.
		"a/s1": {oldEvent(1, messages.RunStarted, "a1", 2*time.Second), oldEvent(2, messages.TextDelta, "a1", 3*time.Second),
			oldEvent(3, messages.RunFinished, "a1", 4*time.Second), oldEvent(4, messages.RunStarted, "a2", 5*time.Second)},
		"z/s2": {oldEvent(1, messages.RunStarted, "b2", time.Second), oldEvent(2, messages.TextDelta, "b2", 6*time.Second)},
		// Trimmed: its first run's start is gone, the second is live.
		"trim": {oldEvent(1, messages.RunStarted, "t1", 0), oldEvent(2, messages.RunFinished, "t1", 7*time.Second),
			oldEvent(3, messages.RunStarted, "t2", 8*time.Second), oldEvent(4, messages.TextDelta, "t2", 9*time.Second)},
	}
	writeFormat1(t, dir, sessions, map[messages.SessionID]uint64{"trim": 3}, map[messages.SessionID]uint64{"a/s1": 4, "z/s2": 2, "trim": 4})

	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if m, _ := readMarker(d.fs, dir); m != markerText2 {
		t.Fatalf("marker after migration = %q", m)
	}
	if _, err := os.Stat(filepath.Join(dir, headsFile)); !os.IsNotExist(err) {
		t.Fatalf("the format-1 heads file is still there: %v", err)
	}
	var all []messages.RunID
	runs, _, err := d.ListRuns(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		all = append(all, r.Run)
	}
	if fmt.Sprint(all) != "[b2 a1 a2 t2]" {
		t.Fatalf("migrated runs in order %v; want [b2 a1 a2 t2] (by the time of their run_started)", all)
	}
	if r, ok, _ := d.Run(ctx, "a1"); !ok || r.FirstSeq != 1 || r.LastSeq != 3 || r.Session != "a/s1" {
		t.Fatalf("a1 = %+v", r)
	}
	live, _ := d.LiveRuns(ctx)
	if len(live) != 3 || live[0].Run != "b2" || live[2].Run != "t2" {
		t.Fatalf("live runs %+v", live)
	}
	// Format-1 events read back, and new ones chain on.
	for s, evs := range sessions {
		first, _ := d.First(ctx, s)
		got, err := d.ReadAfter(ctx, s, 0, 100)
		if err != nil || uint64(len(got)) != uint64(len(evs))-first+1 {
			t.Fatalf("session %s: %d events, %v", s, len(got), err)
		}
		for i, g := range got {
			if e := evs[int(first)-1+i]; g.Seq != e.Seq || g.Type != e.Type || g.RunID != e.RunID || string(g.JSON) != string(e.JSON) {
				t.Fatalf("session %s: read %d %s", s, g.Seq, g.JSON)
			}
		}
	}
	if err := d.Append(ctx, "a/s1", []*messages.Encoded{oldEvent(5, messages.RunFinished, "a2", 10*time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Trim(ctx, "trim", 100); err != nil {
		t.Fatal(err)
	}
	if f, _ := d.First(ctx, "trim"); f != 3 {
		t.Fatalf("Trim dropped the start of live run t2: First = %d", f)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got, err := d2.ReadAfter(ctx, "a/s1", 3, 10); err != nil || len(got) != 2 {
		t.Fatalf("after reopen: %d events, %v", len(got), err)
	}
	if r, _, _ := d2.Run(ctx, "a2"); r.LastSeq != 5 {
		t.Fatalf("a2 = %+v", r)
	}
}

// TestOpen_Format1Damaged: the format-1 heads file says more was
// acknowledged than the store holds.
func TestOpen_Format1Damaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFormat1(t, dir, map[messages.SessionID][]*messages.Encoded{
		"s": {oldEvent(1, messages.RunStarted, "r", 0), oldEvent(2, messages.TextDelta, "r", 0)},
	}, nil, map[messages.SessionID]uint64{"s": 9})
	_, err := Open(dir, Options{})
	var de *DamageError
	if !errors.As(err, &de) || len(de.Sessions) != 1 || de.Sessions[0].LastIntact != 2 || de.Sessions[0].Acknowledged != 9 {
		t.Fatalf("Open = %v", err)
	}
	if m, _ := readMarker(vfsDefault(), dir); m != markerText1 {
		t.Fatalf("a refused migration changed the marker to %q", m)
	}
	d, err := Open(dir, Options{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if h, _ := d.Head(context.Background(), "s"); h != 9 {
		t.Fatalf("Head after repair = %d, want 9 (format 1 has no reservations)", h)
	}
	if live, _ := d.LiveRuns(context.Background()); len(live) != 1 {
		t.Fatalf("live %+v", live)
	}
}

func vfsDefault() vfs.FS { return vfs.Default }
