package journal_test

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS wraps the OS filesystem and calls hook before every write and
// every sync of the files whose name ends in suffix, whether the store
// creates them or recycles old ones. A hook error fails the call.
type walFS struct {
	vfs.FS
	suffix string
	hook   func(sync bool) error
}

// newWALFS hooks the write-ahead log files.
func newWALFS(hook func(sync bool) error) vfs.FS {
	return walFS{FS: vfs.Default, suffix: ".log", hook: hook}
}

// newTableFS hooks the table files (flushes, compactions).
func newTableFS(hook func(sync bool) error) vfs.FS {
	return walFS{FS: vfs.Default, suffix: ".sst", hook: hook}
}

func (fs walFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, fs.suffix) {
		return f, err
	}
	return walFile{File: f, hook: fs.hook}, nil
}

func (fs walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs walFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type walFile struct {
	vfs.File
	hook func(sync bool) error
}

func (f walFile) Write(p []byte) (int, error) {
	if err := f.hook(false); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f walFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.hook(false); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f walFile) Sync() error {
	if err := f.hook(true); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f walFile) SyncData() error {
	if err := f.hook(true); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f walFile) SyncTo(length int64) (bool, error) {
	if err := f.hook(true); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

// readOnlyFS fails every file creation, like a read-only mount.
type readOnlyFS struct {
	vfs.FS
	err error
}

func (fs readOnlyFS) Create(string, vfs.DiskWriteCategory) (vfs.File, error) { return nil, fs.err }
