package sim

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// hangFS is the journal's filesystem in a simulation: it can hold the next
// fsync of a write-ahead log (a file named *.log) until the driver lets it
// go, so that a crash falls inside a group commit: its batch written, not
// yet synced, and (unless a fix is taken out) not yet acknowledged.
type hangFS struct {
	vfs.FS

	mu      sync.Mutex
	armed   bool
	holding bool
	release chan struct{} // closed by let: the held fsync goes on
}

func newHangFS(fs vfs.FS) *hangFS { return &hangFS{FS: fs, release: make(chan struct{})} }

// arm holds the next write-ahead log fsync.
func (h *hangFS) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

// held reports whether an fsync is being held; if none is, it disarms.
func (h *hangFS) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	return h.holding
}

// let lets a held fsync go on (against a disk the crash already copied).
func (h *hangFS) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding {
		h.holding = false
		close(h.release)
		h.release = make(chan struct{})
	}
}

// hold blocks a write-ahead log's fsync while armed, until let.
func (h *hangFS) hold(name string) {
	if !strings.HasSuffix(name, ".log") {
		return
	}
	h.mu.Lock()
	if !h.armed {
		h.mu.Unlock()
		return
	}
	h.armed, h.holding = false, true
	release := h.release
	h.mu.Unlock()
	<-release
}

func (h *hangFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &hangFile{File: f, fs: h, name: name}, nil
}

func (h *hangFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := h.FS.Create(name, c)
	return h.wrap(f, name, err)
}

func (h *hangFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := h.FS.OpenReadWrite(name, c, opts...)
	return h.wrap(f, name, err)
}

func (h *hangFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := h.FS.ReuseForWrite(oldname, newname, c)
	return h.wrap(f, newname, err)
}

func (h *hangFS) Unwrap() vfs.FS { return h.FS }

// hangFile is a file of a hangFS: its fsyncs may be held.
type hangFile struct {
	vfs.File
	fs   *hangFS
	name string
}

func (f *hangFile) Sync() error {
	f.fs.hold(f.name)
	return f.File.Sync()
}

func (f *hangFile) SyncData() error {
	f.fs.hold(f.name)
	return f.File.SyncData()
}

func (f *hangFile) SyncTo(length int64) (bool, error) {
	f.fs.hold(f.name)
	return f.File.SyncTo(length)
}
