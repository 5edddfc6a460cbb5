package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func hwmFixture(t *testing.T) (dir string, h *hwmLog) {
	t.Helper()
	dir = t.TempDir()
	h, err := writeHWM(vfs.Default, dir, hwmFile, []hwmEntry{{id: "b", head: 5, reserved: 100, verified: 3}, {id: "a", head: 1, reserved: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return dir, h
}

func readFixture(t *testing.T, dir string) (hwmRead, error) {
	t.Helper()
	return readHWM(vfs.Default, dir, hwmFile)
}

func TestHWM_RoundTrip(t *testing.T) {
	t.Parallel()
	dir, h := hwmFixture(t)
	if err := h.heads([]hwmEntry{{id: "a", head: 7}, {id: "c", head: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := h.reserve([]hwmEntry{{id: "a", reserved: 65543}}); err != nil {
		t.Fatal(err)
	}
	if err := h.heads([]hwmEntry{{id: "a", head: 6}}); err != nil { // heads only grow
		t.Fatal(err)
	}
	r, err := readFixture(t, dir)
	if err != nil || r.tornAt != -1 {
		t.Fatalf("read: %v, torn at %d", err, r.tornAt)
	}
	want := map[string]hwmEntry{
		"a": {id: "a", head: 7, reserved: 65543},
		"b": {id: "b", head: 5, reserved: 100, verified: 3},
		"c": {id: "c", head: 1},
	}
	if len(r.entries) != len(want) {
		t.Fatalf("entries %v", r.entries)
	}
	for id, w := range want {
		if g := r.entries[messagesSession(id)]; g == nil || *g != w {
			t.Fatalf("session %s: %+v, want %+v", id, g, w)
		}
	}
}

func TestHWM_Snapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var entries []hwmEntry
	for i := range 70000 { // more than one snapshot frame
		entries = append(entries, hwmEntry{id: messagesSession(fmt.Sprintf("s%06d-%s", i, bytes.Repeat([]byte{'x'}, i%40))), head: uint64(i), reserved: uint64(i) + 9})
	}
	h, err := writeHWM(vfs.Default, dir, hwmFile, entries)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r, err := readFixture(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if g := r.entries[e.id]; g == nil || g.head != e.head || g.reserved != e.reserved {
			t.Fatalf("session %q: %+v, want %+v", e.id, g, e)
		}
	}
}

// TestHWM_TornTail: what follows the last fsynced frame may be cut or
// garbage after a crash; it is ignored, not an error.
func TestHWM_TornTail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"Cut", func(b []byte) []byte { return b[:len(b)-3] }},
		{"Garbage", func(b []byte) []byte { return append(b, 0xde, 0xad, hwmMagic0, hwmMagic1, 'h', 0, 0) }},
		{"Zeros", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
		{"Flipped", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, h := hwmFixture(t)
			if err := h.heads([]hwmEntry{{id: "a", head: 9}}); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, hwmFile)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, c.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := readFixture(t, dir)
			if err != nil || r.tornAt < 0 {
				t.Fatalf("read = torn at %d, %v; want the tail ignored", r.tornAt, err)
			}
			if r.entries["b"].reserved != 100 {
				t.Fatalf("lost the synced snapshot: %+v", r.entries["b"])
			}
		})
	}
	t.Run("HeadsAfterGarbage", func(t *testing.T) { // unsynced frames: some pages lost, later ones kept
		dir, h := hwmFixture(t)
		if err := h.heads([]hwmEntry{{id: "a", head: 8}}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, hwmFile)
		b, _ := os.ReadFile(path)
		b[len(b)-2] ^= 0xff
		b = appendFrame(b, frameHeads, []hwmEntry{{id: "a", head: 9}})
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := readFixture(t, dir)
		if err != nil || r.entries["a"].head != 9 {
			t.Fatalf("read = %+v, %v", r.entries["a"], err)
		}
	})
}

// TestHWM_Damaged: damage before a synced frame is an error.
func TestHWM_Damaged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string, h *hwmLog, b []byte) []byte
	}{
		{"Snapshot", func(_ *testing.T, _ string, _ *hwmLog, b []byte) []byte { b[20] ^= 1; return b }},
		// The snapshot's last frame, nothing after it: a flipped bit, not a
		// torn tail (the snapshot was synced before it was renamed in).
		{"SnapshotEnd", func(_ *testing.T, _ string, _ *hwmLog, b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"SnapshotCut", func(_ *testing.T, _ string, _ *hwmLog, b []byte) []byte { return b[:len(b)-1] }},
		{"Version", func(_ *testing.T, _ string, _ *hwmLog, b []byte) []byte { b[12] ^= 1; return b }},
		{"Empty", func(*testing.T, string, *hwmLog, []byte) []byte { return nil }},
		{"BeforeReservation", func(t *testing.T, dir string, h *hwmLog, _ []byte) []byte {
			if err := h.heads([]hwmEntry{{id: "a", head: 9}}); err != nil {
				t.Fatal(err)
			}
			if err := h.reserve([]hwmEntry{{id: "a", reserved: 99}}); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, hwmFile))
			b[int(h.base)+hwmFrameHeader] ^= 1 // in the heads frame
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, h := hwmFixture(t)
			path := filepath.Join(dir, hwmFile)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, c.damage(t, dir, h, b), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := readFixture(t, dir)
			if !errors.Is(err, errHWMDamaged) {
				t.Fatalf("read = %v, want damaged", err)
			}
			if r.entries == nil {
				t.Fatal("no entries map")
			}
		})
	}
	if _, err := readFixture(t, t.TempDir()); !isNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestHWM_Grown(t *testing.T) {
	t.Parallel()
	_, h := hwmFixture(t)
	for !h.grown() {
		if err := h.heads([]hwmEntry{{id: "session-with-a-long-name", head: 1 << 40}}); err != nil {
			t.Fatal(err)
		}
	}
	if h.size < hwmCompactBytes {
		t.Fatalf("grown at %d bytes", h.size)
	}
}

func FuzzParseHWM(f *testing.F) {
	b := sealFrame(append([]byte{hwmMagic0, hwmMagic1, frameVersion, 0, 0, 0, 0, 0, 0, 0, 0}, hwmVersion...), 0)
	b = appendFrame(b, frameSnapshot, []hwmEntry{{id: "s", head: 1, reserved: 2, verified: 1}})
	b = appendFrame(b, frameHeads, []hwmEntry{{id: "s", head: 3}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseHWM(b)
	})
}
