package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// This file reads the answers to prompts from stdin, line by line, with
// deadlines: a prompt that times out, or a command that ends, never leaves
// a goroutine blocked on stdin.

// deadliner is an input whose reads can be given a deadline (*os.File on a
// terminal or pipe, net.Conn, test doubles). A read that passes its
// deadline fails with os.ErrDeadlineExceeded.
type deadliner interface {
	SetReadDeadline(t time.Time) error
}

// lineReader reads answers line by line. When its input supports read
// deadlines, a read never outlives its deadline nor the command (cancel
// ends the read in progress), so no goroutine is ever left blocked on
// stdin: the reads happen on the follow loop's own goroutine, with the
// deadline of the prompt.
//
// An *os.File (stdin) is reopened on first use through /proc/self/fd/N:
// the new open file description of the same terminal or pipe is
// non-blocking and pollable, so its reads take deadlines, while the
// descriptor the command shares with its shell stays blocking. Where that
// fails (not Linux, a regular file, a socket), the file is read as it is:
// regular files and buffers never block; a terminal then cannot time out
// the prompt, though the engine still expires the interrupt.
//
// line and close are called from one goroutine; cancel from any.
type lineReader struct {
	src io.Reader

	mu        sync.Mutex // guards the fields up to cancelled
	r         io.Reader
	dl        deadliner // nil: reads take no deadline
	file      *os.File  // the reopened file, closed by close
	opened    bool
	cancelled bool
	isTTY     bool // the input is a terminal: it echoes what is typed

	buf []byte // read but not returned yet: a partial line, or more lines
	err error  // sticky end of input
}

func newLineReader(src io.Reader) *lineReader { return &lineReader{src: src} }

// open picks the reader on first use. Must be called with l.mu held.
func (l *lineReader) openLocked() {
	l.opened, l.r = true, l.src
	f, ok := l.src.(*os.File)
	if !ok {
		l.dl, _ = l.src.(deadliner)
		return
	}
	l.isTTY = term.IsTerminal(int(f.Fd()))
	if rf, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil {
		if rf.SetReadDeadline(time.Time{}) == nil {
			l.r, l.dl, l.file = rf, rf, rf
			return
		}
		rf.Close()
	}
	if f.SetReadDeadline(time.Time{}) == nil { // already non-blocking
		l.dl = f
	}
}

// line returns the next line without its line ending. With a deadline on
// an input that takes deadlines, it returns os.ErrDeadlineExceeded when
// the deadline passes (what was typed so far is kept for the next call)
// or after cancel. At the end of the input it returns the last,
// unterminated line, then io.EOF (or the read error) from then on.
func (l *lineReader) line(deadline time.Time) (string, error) {
	for {
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 {
			s := string(bytes.TrimSuffix(l.buf[:i], []byte("\r")))
			l.buf = l.buf[i+1:]
			return s, nil
		}
		if l.err != nil {
			if len(l.buf) > 0 {
				s := string(l.buf)
				l.buf = nil
				return s, nil
			}
			return "", l.err
		}
		l.mu.Lock()
		if !l.opened {
			l.openLocked()
		}
		r, dl := l.r, l.dl
		if dl != nil {
			d := deadline
			if l.cancelled {
				d = time.Unix(1, 0)
			}
			if err := dl.SetReadDeadline(d); err != nil {
				l.mu.Unlock()
				return "", err
			}
		}
		l.mu.Unlock()
		var chunk [512]byte
		n, err := r.Read(chunk[:])
		l.buf = append(l.buf, chunk[:n]...)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if bytes.IndexByte(l.buf, '\n') < 0 {
				return "", err
			}
		default:
			l.err = err
		}
	}
}

// terminal reports whether the input is a terminal (which echoes the
// answers as they are typed). Call it after line.
func (l *lineReader) terminal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.isTTY
}

// cancel makes the read in progress, and every later one, end at once
// with os.ErrDeadlineExceeded (when the input takes deadlines). It is
// called when the command's context ends.
func (l *lineReader) cancel() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelled = true
	if l.dl != nil {
		_ = l.dl.SetReadDeadline(time.Unix(1, 0))
	}
}

// close releases the reopened file, if any.
func (l *lineReader) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file, l.dl = nil, nil
	return err
}
