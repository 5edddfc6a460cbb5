package transport

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// held starts a held stream of the session after the cursor on a new
// goroutine, as a handler would (streamConn.run); returned is closed when
// run has returned.
func (fx *streamFixture) held(f *fakeFramer, after uint64, gone <-chan struct{}) (c *streamConn, returned <-chan struct{}) {
	fx.t.Helper()
	c = fx.srv.newStreamConn(f, newFlight(nil), nil, messages.LocalTenant, fx.session, fx.subscribe(after))
	ret := make(chan struct{})
	go func() {
		defer close(ret)
		c.run(gone)
	}()
	return c, ret
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestStreamConn_HeldServesOnItsCaller: a held stream is written by the
// goroutine that called run, for its whole life. It never needs a writer
// goroutine (the server's writer group refuses new ones here and the stream
// still serves), stays served past linger, gets heartbeats when idle, and
// ends as client_gone, without a final frame, when gone closes.
func TestStreamConn_HeldServesOnItsCaller(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb = 10 * time.Second
		fx := newStreamFixture(t, Config{Heartbeat: hb})
		f := newFakeFramer()
		gone := make(chan struct{})
		c, returned := fx.held(f, fx.head, gone)
		last := fx.publish(3)
		synctest.Wait()
		assertSeqs(t, f.state().seqs, fx.head+1, last)

		time.Sleep(3 * linger) // idle: a hijacked stream's writer would have exited
		synctest.Wait()
		if isClosed(returned) || !c.running.Load() {
			t.Fatal("the held stream's writer left it")
		}
		last = fx.publish(2)
		synctest.Wait()
		assertSeqs(t, f.state().seqs, fx.head+1, last)

		time.Sleep(hb + hb/4) // the heartbeat loop's first tick a heartbeat after the last write
		synctest.Wait()
		if st := f.state(); st.pings != 1 {
			t.Fatalf("%d pings after a heartbeat idle, want 1", st.pings)
		}
		if f.overlap.Load() {
			t.Fatal("two goroutines wrote to the connection at once")
		}

		close(gone) // the client left
		synctest.Wait()
		if !isClosed(returned) || !isClosed(c.done) {
			t.Fatal("the held stream did not end when its client left")
		}
		if st := f.state(); len(st.finals) != 0 || st.closes != 1 {
			t.Fatalf("finals %v, closes %d; want none and one", st.finals, st.closes)
		}
		if r := *c.endReason.Load(); r != endClientGone {
			t.Fatalf("end reason %q, want %q", r, endClientGone)
		}
	})
}

// TestStreamConn_HeldNeedsNoWriterGroup: a held stream started after the
// server stopped starting writer goroutines is served all the same (ready
// only leaves tokens for it), and shutdown ends it with its final frame.
func TestStreamConn_HeldNeedsNoWriterGroup(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		fx.srv.writers.Close() // a hijacked stream would now end at its first wake-up
		f := newFakeFramer()
		c, returned := fx.held(f, 0, nil)
		last := fx.publish(600)
		synctest.Wait()
		assertSeqs(t, f.state().seqs, 1, last)
		c.shutdown()
		synctest.Wait()
		if !isClosed(returned) {
			t.Fatal("run did not return after shutdown")
		}
		if st := f.state(); len(st.finals) != 1 || !errors.Is(st.finals[0], ErrShutdown) || st.closes != 1 {
			t.Fatalf("finals %v closes %d, want the shutdown frame and one close", st.finals, st.closes)
		}
	})
}

// TestStreamConn_HeldUntilRunEnd: ?until=run_end ends a held stream after
// the terminal event, with the run_ended frame, and run returns.
func TestStreamConn_HeldUntilRunEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		f := newFakeFramer()
		c := fx.srv.newStreamConn(f, newFlight(nil), nil, messages.LocalTenant, fx.session, fx.subscribe(0))
		c.until = &untilRun{}
		ret := make(chan struct{})
		go func() { defer close(ret); c.run(nil) }()
		synctest.Wait()
		if !isClosed(ret) {
			t.Fatal("run did not return after the terminal event")
		}
		st := f.state()
		assertSeqs(t, st.seqs, 1, fx.head) // the fixture's run ends the session so far
		if len(st.finals) != 1 || st.finals[0].(*CloseReason).Code != CloseCodeRunEnded {
			t.Fatalf("finals %v, want run_ended", st.finals)
		}
	})
}

// fakeResponse is a ResponseWriter with deadlines, flushing and a Write
// that can block like one to a stalled client. Any use after the handler
// returned fails the test, as HTTP/2's writer panics.
type fakeResponse struct {
	t      *testing.T
	header http.Header

	mu        sync.Mutex // guards the fields below
	returned  bool
	blocked   chan struct{} // when non-nil, Write waits for it or for a past deadline
	entered   chan struct{} // closed when a Write is waiting
	cut       chan struct{} // closed by a deadline in the past
	deadlines []time.Time
	written   []byte
	flushes   int
}

func newFakeResponse(t *testing.T) *fakeResponse {
	return &fakeResponse{t: t, header: http.Header{}, cut: make(chan struct{}), entered: make(chan struct{})}
}

func (w *fakeResponse) use(what string) {
	if w.returned {
		w.t.Errorf("%s after the handler returned", what)
	}
}

func (w *fakeResponse) Header() http.Header { return w.header }
func (w *fakeResponse) WriteHeader(int)     {}

func (w *fakeResponse) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.use("Write")
	blocked := w.blocked
	w.mu.Unlock()
	if blocked != nil {
		close(w.entered)
		select {
		case <-blocked:
		case <-w.cut:
			return 0, os.ErrDeadlineExceeded
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written = append(w.written, b...)
	return len(b), nil
}

func (w *fakeResponse) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.use("Flush")
	w.flushes++
	return nil
}

func (w *fakeResponse) SetWriteDeadline(d time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.use("SetWriteDeadline")
	w.deadlines = append(w.deadlines, d)
	if !d.IsZero() && d.Before(time.Now()) && !isClosed(w.cut) {
		close(w.cut)
	}
	return nil
}

func (w *fakeResponse) lastDeadline() (time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deadlines) == 0 {
		return time.Time{}, 0
	}
	return w.deadlines[len(w.deadlines)-1], len(w.deadlines)
}

// TestResponseSink_WritesFlushesAndGuards: a batch is written and flushed;
// abort gives the stream finalWait (a deadline, not a cut); close from
// another goroutine cuts a write blocked on the client; once the handler
// has finished, nothing touches the ResponseWriter again.
func TestResponseSink_WritesFlushesAndGuards(t *testing.T) {
	t.Parallel()
	w := newFakeResponse(t)
	s := newResponseSink(w, http.NewResponseController(w))
	if n, err := s.write(net.Buffers{[]byte("a"), []byte("bc")}); n != 3 || err != nil || string(w.written) != "abc" || w.flushes != 1 {
		t.Fatalf("write = %d, %v; wrote %q with %d flushes", n, err, w.written, w.flushes)
	}

	before := time.Now()
	s.abort()
	if d, _ := w.lastDeadline(); d.Before(before.Add(finalWait)) || d.After(time.Now().Add(finalWait)) {
		t.Fatalf("abort set the deadline %v, want finalWait from now", d)
	}

	// A write blocked on a stalled client, cut by close from elsewhere.
	w.mu.Lock()
	w.blocked = make(chan struct{})
	w.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		_, err := s.write(net.Buffers{[]byte("d")})
		errc <- err
	}()
	<-w.entered
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the cut write returned %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("close did not cut the blocked write")
	}
	if _, err := s.write(net.Buffers{[]byte("e")}); !errors.Is(err, errSinkClosed) {
		t.Fatalf("write after close = %v, want errSinkClosed", err)
	}

	s.finish() // the handler clears the deadline and returns
	if d, _ := w.lastDeadline(); !d.IsZero() {
		t.Fatalf("finish left the deadline %v", d)
	}
	w.mu.Lock()
	w.returned = true
	w.mu.Unlock()
	s.abort() // the heartbeat loop, late: must not touch the writer
	s.deadline(time.Now())
	_ = s.close()
	if _, err := s.write(net.Buffers{[]byte("f")}); !errors.Is(err, errSinkClosed) {
		t.Fatalf("write after finish = %v", err)
	}
}

// TestResponseSink_CloseByWriterDoesNotCut: the writer's own close at a
// clean end (no write under way) sets no deadline: the response ends
// normally (an HTTP/2 stream is not reset).
func TestResponseSink_CloseByWriterDoesNotCut(t *testing.T) {
	t.Parallel()
	w := newFakeResponse(t)
	s := newResponseSink(w, http.NewResponseController(w))
	if _, err := s.write(net.Buffers{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	_ = s.close()
	if _, n := w.lastDeadline(); n != 0 {
		t.Fatalf("close set %d deadlines", n)
	}
}

// TestCanFlush follows Unwrap as http.ResponseController does.
func TestCanFlush(t *testing.T) {
	t.Parallel()
	rec := newFakeResponse(t)
	type plain struct{ http.ResponseWriter }
	for _, c := range []struct {
		w    http.ResponseWriter
		want bool
	}{
		{rec, true},
		{plain{rec}, false},
		{unwrapping{rec}, true},
		{unwrapping{plain{rec}}, false},
		{unwrapping{unwrapping{rec}}, true},
	} {
		if got := canFlush(c.w); got != c.want {
			t.Errorf("canFlush(%T) = %v, want %v", c.w, got, c.want)
		}
	}
}

type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }
