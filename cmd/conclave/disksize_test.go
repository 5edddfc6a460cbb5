package main

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// TestServe_SmallJournalFootprint: with --journal-memtable-mib 4 a data
// directory that served a run takes a few MiB, not the 70 MiB the default
// memtable's preallocated write-ahead log takes (issue 31).
func TestServe_SmallJournalFootprint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, 0, nil, "--data", dir, "--journal-memtable-mib", "4", "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":3,"tokens":5}}`)
	a.runEvents(t, rc.SessionID, rc.RunID)
	srv.terminate()
	var size int64
	if err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if size > 8<<20 {
		t.Fatalf("the data directory takes %d bytes with a 4 MiB memtable, want under 8 MiB", size)
	}
}
