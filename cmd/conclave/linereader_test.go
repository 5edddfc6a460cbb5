package main

import (
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestLineReader_Lines(t *testing.T) {
	t.Parallel()
	l := newLineReader(strings.NewReader("a\r\nb\n\nlast"))
	for _, want := range []string{"a", "b", "", "last"} {
		if got, err := l.line(time.Time{}); got != want || err != nil {
			t.Fatalf("line() = %q, %v; want %q", got, err, want)
		}
	}
	for range 2 {
		if got, err := l.line(time.Time{}); got != "" || !errors.Is(err, io.EOF) {
			t.Fatalf("line() at the end = %q, %v; want EOF", got, err)
		}
	}
}

// chunkInput is a deadliner input that delivers what is sent on its
// channel, one chunk per read.
type chunkInput struct {
	chunks   chan string
	mu       sync.Mutex
	deadline time.Time
}

func (c *chunkInput) SetReadDeadline(d time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = d
	return nil
}

func (c *chunkInput) Read(p []byte) (int, error) {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	timer := time.NewTimer(time.Until(d))
	defer timer.Stop()
	select {
	case s := <-c.chunks:
		return copy(p, s), nil
	case <-timer.C:
		return 0, os.ErrDeadlineExceeded
	}
}

// TestLineReader_DeadlineKeepsPartialLine: a deadline in the middle of a
// line loses nothing typed.
func TestLineReader_DeadlineKeepsPartialLine(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		in := &chunkInput{chunks: make(chan string, 4)}
		l := newLineReader(in)
		in.chunks <- "app"
		start := time.Now()
		if got, err := l.line(start.Add(time.Second)); got != "" || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("line() = %q, %v; want the deadline", got, err)
		}
		if el := time.Since(start); el != time.Second {
			t.Errorf("the read waited %v, want its 1s deadline", el)
		}
		in.chunks <- "rove\nnext\n"
		for _, want := range []string{"approve", "next"} {
			if got, err := l.line(time.Now().Add(time.Second)); got != want || err != nil {
				t.Fatalf("line() = %q, %v; want %q", got, err, want)
			}
		}
	})
}

// TestLineReader_Pipe reads a real pipe: on Linux it is reopened with
// deadlines, and cancel ends a read that waits without one.
func TestLineReader_Pipe(t *testing.T) {
	t.Parallel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	l := newLineReader(pr)
	defer l.close()
	if _, err := pw.WriteString("yes\npart"); err != nil {
		t.Fatal(err)
	}
	if got, err := l.line(time.Time{}); got != "yes" || err != nil {
		t.Fatalf("line() = %q, %v", got, err)
	}
	if runtime.GOOS != "linux" {
		return // the rest needs deadlines
	}
	if l.file == nil {
		t.Fatal("the pipe was not reopened")
	}
	if got, err := l.line(time.Now().Add(-time.Second)); got != "" || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("line() past its deadline = %q, %v", got, err)
	}
	if _, err := pw.WriteString("ial\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := l.line(time.Time{}); got != "partial" || err != nil {
		t.Fatalf("line() = %q, %v; want the line typed across the deadline", got, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.line(time.Time{}) // no deadline: waits until cancel
		done <- err
	}()
	l.cancel()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("cancelled read = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not end the read")
	}
}
