package journal

import "github.com/cockroachdb/pebble/v2/vfs"

// WithFS returns opts with the filesystem replaced (error injection, fsync
// counting).
func WithFS(opts Options, fs vfs.FS) Options {
	opts.fs = fs
	return opts
}

// QueuedCommits is how many batches wait for the committer.
func QueuedCommits(d *Durable) int { return len(d.commits) }
