package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/testkit"
)

// TestSendQueue_PeerNotReading: the probe counts what a peer that does
// not read leaves in the server's send queue, through the tracked
// connection the server hands to streams, and sees it drain when the peer
// reads.
func TestSendQueue_PeerNotReading(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("SIOCOUTQ is Linux only; elsewhere the fallback reports false")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	peer, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	raw, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	tracker := newConnTracker(0, newTestMetrics(t))
	conn := tracker.admit(raw)
	defer conn.Close()
	q := newSendQueue(conn)
	if n, ok := q.Queued(); !ok || n != 0 {
		t.Fatalf("Queued on a fresh connection = %d, %v; want 0, true", n, ok)
	}
	// Fill the peer's receive buffer and our send buffer: write until a
	// write cannot finish (the deadline is how we notice the buffers are
	// full, not a synchronisation).
	chunk := make([]byte, 16<<10)
	written := 0
	for {
		_ = conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := conn.Write(chunk)
		written += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	queued, ok := q.Queued()
	if !ok || queued <= 0 || queued > written {
		t.Fatalf("Queued = %d, %v after %d bytes written to a peer that reads nothing; want 0 < n <= %d", queued, ok, written, written)
	}
	t.Logf("%d bytes written, %d in the send queue, the rest in the peer's receive buffer", written, queued)
	// The peer reads everything: the queue drains.
	if _, err := io.ReadFull(peer, make([]byte, written)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testkit.Watchdog)
	for {
		n, ok := q.Queued()
		if ok && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Queued = %d, %v after the peer read everything", n, ok)
		}
		runtime.Gosched()
	}
	_ = conn.Close()
	if _, ok := q.Queued(); ok {
		t.Error("Queued reports true on a closed connection")
	}
}

type fixedQueue struct{ n int }

func (q *fixedQueue) Queued() (int, bool) { return q.n, true }
func (q *fixedQueue) PeerClosed() bool    { return false }

// TestSendQueue_PeerClosed: the probe tells an open peer (silent, or with
// bytes waiting) from one that closed or reset, without consuming.
func TestSendQueue_PeerClosed(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the peek is Linux only; elsewhere the fallback reports false")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pair := func() (net.Conn, sendQueue, net.Conn) {
		peer, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		raw, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conn := newConnTracker(0, newTestMetrics(t)).admit(raw)
		return conn, newSendQueue(conn), peer
	}
	waitFor := func(q sendQueue, want bool) {
		t.Helper()
		deadline := time.Now().Add(testkit.Watchdog)
		for q.PeerClosed() != want { // the FIN or RST crosses loopback asynchronously
			if time.Now().After(deadline) {
				t.Fatalf("PeerClosed never became %v", want)
			}
			runtime.Gosched()
		}
	}
	conn, q, peer := pair()
	defer conn.Close()
	if q.PeerClosed() {
		t.Fatal("a silent, open peer is reported closed")
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if q.PeerClosed() {
		t.Fatal("a peer with a byte waiting is reported closed")
	}
	_ = peer.Close() // FIN after the byte: still reported open while the byte is unread
	buf := make([]byte, 1)
	if _, err := io.ReadFull(conn, buf); err != nil { // the byte was not consumed by the peeks
		t.Fatal(err)
	}
	waitFor(q, true)

	conn2, q2, peer2 := pair()
	defer conn2.Close()
	_ = peer2.(*net.TCPConn).SetLinger(0) // RST
	_ = peer2.Close()
	waitFor(q2, true)
}

func TestFlight_Lag(t *testing.T) {
	t.Parallel()
	q := &fixedQueue{}
	f := newFlight(q)
	f.begin(1000, 10) // bytes 0..1000, 10 events
	f.done(1000)
	f.begin(10, 0) // a ping
	f.done(10)
	f.begin(500, 5) // bytes 1010..1510
	q.n = 100       // the last 90 bytes of the first batch and the ping are still in the kernel
	if e, b := f.lag(); e != 6 || b != 600 {
		t.Fatalf("a blocked write: lag = %d events, %d bytes; want 6 (5 + 1 of the first batch, rounded up), 600", e, b)
	}
	f.done(500)
	q.n = 600 // the same, all in the kernel now
	if e, b := f.lag(); e != 6 || b != 600 {
		t.Fatalf("lag = %d events, %d bytes; want 6 (5 + 1 of the first batch, rounded up), 600", e, b)
	}
	q.n = 0
	if e, b := f.lag(); e != 0 || b != 0 {
		t.Fatalf("all received: lag = %d, %d", e, b)
	}
	// Far behind: the marks are merged, the count stays exact.
	for range 3 * maxMarks {
		f.begin(100, 2)
		f.done(100)
	}
	q.n = 3 * maxMarks * 100
	if e, _ := f.lag(); e != 3*maxMarks*2 {
		t.Fatalf("far behind: lag = %d events, want %d", e, 3*maxMarks*2)
	}
	if len(f.marks) > maxMarks {
		t.Fatalf("%d marks kept, want <= %d", len(f.marks), maxMarks)
	}
}

func newTestMetrics(t *testing.T) *metrics {
	t.Helper()
	srv, err := New(Config{Engine: testkit.NewEngine(t, actors.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.metrics
}

// TestSendQueue_Pipe: a connection without a socket (net.Pipe, as the
// simulator's in-memory listener hands out) gets the fallback: the probe
// cannot tell, and bytes the writes took count as received.
func TestSendQueue_Pipe(t *testing.T) {
	t.Parallel()
	server, peer := net.Pipe()
	defer peer.Close()
	conn := newConnTracker(0, newTestMetrics(t)).admit(server)
	defer conn.Close()
	q := newSendQueue(conn)
	if _, ok := q.(noSendQueue); !ok {
		t.Fatalf("send queue of a pipe: %T, want noSendQueue", q)
	}
	fl := newFlight(q)
	fl.begin(10, 2)
	fl.done(10)
	if events, bytes := fl.lag(); events != 0 || bytes != 0 || q.PeerClosed() {
		t.Fatalf("lag %d events, %d bytes, peer closed %v; want 0, 0, false", events, bytes, q.PeerClosed())
	}
}
