package transport

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection limits.
//
// Every accepted connection goes through a connTracker. It counts open
// connections against MaxConnections and keeps the ones that are doing no
// work for anyone (a new connection whose request headers are not complete
// yet, and a keep-alive connection waiting for its next request) in one
// list, oldest first. At the cap a new connection evicts the oldest of
// them; only when none is left (every connection is in a request or is a
// stream) is the newcomer refused, with a fast 503.
//
// Why /healthz stays answerable under a flood of idle or slowloris
// connections: such connections are by construction in the evictable list
// (headers not complete: net/http reports StateNew or StateIdle until
// they are), so they can never fill the cap; each newcomer, including a
// health check, takes the slot of the oldest of them. A newcomer is itself
// evicted only after every connection older than it in the list, so an
// attacker would have to open MaxConnections-minus-busy connections within
// the time the health check needs to send one request line. The slots that
// cannot be evicted are bounded separately: streams by MaxStreams (below
// MaxConnections), requests by ReadTimeout and the handlers' own timeouts,
// and an unauthenticated request is answered and closed as soon as its
// headers are read (refuseUnauthenticated). Eviction may race with a
// keep-alive client that has just sent its next request: it sees the
// connection closed and retries, as it must for any idle connection.

// Defaults of the connection limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// fdReserveMin is the least the default MaxConnections leaves of
	// RLIMIT_NOFILE to everything else (the journal's files, the
	// listener, logs); the share left is a quarter, at least this.
	fdReserveMin = 64
	// maxDefaultConnections bounds the derived default: beyond it a
	// connection's memory (~30 KB) matters more than file descriptors.
	maxDefaultConnections = 100_000
)

// keepAlive probes accepted connections: a peer that vanished without a
// FIN or RST (host down, cable cut, NAT entry dropped) is detected after
// Idle + Interval×Count = 30 s + 3×10 s = 60 s of silence. While the
// connection has unacknowledged data (a stream writing to a dead peer) the
// kernel's retransmission limit ends it instead (net.ipv4.tcp_retries2,
// about 15 minutes by default); a peer that is alive but reads slowly is
// never cut by either.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3}

// defaultMaxConnections derives the cap from RLIMIT_NOFILE (which the Go
// runtime raised to its hard limit at start), leaving a quarter of it, at
// least fdReserveMin descriptors, to the rest of the process.
func defaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024 // cannot tell: a conservative figure
	}
	n := rl.Cur
	if n > 1<<30 {
		n = 1 << 30
	}
	reserve := max(n/4, fdReserveMin)
	if n <= reserve+16 {
		return 16
	}
	return int(min(n-reserve, maxDefaultConnections))
}

// Reasons of conclave_connections_evicted_total and
// conclave_connections_refused_total.
const (
	evictedReadingHeaders = "reading_headers"
	evictedIdle           = "idle"
	refusedMaxConnections = "max_connections"
)

// connTracker counts and sheds connections; see the comment above.
type connTracker struct {
	max     int // <= 0: no cap
	metrics *metrics

	mu         sync.Mutex // guards open and the evictable list (head, tail, and every trackedConn's prev, next, listed, idle)
	open       int
	head, tail *trackedConn // evictable connections, oldest first
}

func newConnTracker(max int, m *metrics) *connTracker { return &connTracker{max: max, metrics: m} }

// trackedConn is an accepted connection.
type trackedConn struct {
	net.Conn
	t *connTracker

	prev, next *trackedConn // in t's evictable list; under t.mu
	listed     bool         // under t.mu
	idle       bool         // under t.mu: in the list as a keep-alive connection (else still reading its first request)
	closed     atomic.Bool
}

// admit registers c, evicting the oldest evictable connection at the cap.
// It returns nil when c was refused (every slot is busy): then c has been
// answered 503 and closed.
func (t *connTracker) admit(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	var victim *trackedConn
	if t.max > 0 && t.open >= t.max {
		victim = t.head
		if victim != nil {
			t.unlistLocked(victim)
		}
	}
	if t.max > 0 && t.open >= t.max && victim == nil {
		t.mu.Unlock()
		t.metrics.connRefused.WithLabelValues(refusedMaxConnections).Inc()
		refuseConn(c)
		return nil
	}
	t.open++
	t.listLocked(tc, false)
	t.mu.Unlock()
	t.metrics.connsOpen.Inc()
	if victim != nil {
		reason := evictedReadingHeaders
		if victim.idle {
			reason = evictedIdle
		}
		t.metrics.connEvicted.WithLabelValues(reason).Inc()
		_ = victim.Close() // frees its slot before the newcomer is served; its net/http goroutine sees the error and ends
	}
	return tc
}

// refuseConn answers a connection refused at the cap and closes it. The
// connection is new, so its send buffer is empty and the short answer
// fits: the write does not block; the deadline is only a guard.
func refuseConn(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(refusedAnswer)
	_ = c.Close()
}

var refusedAnswer = func() []byte {
	body := `{"error":{"code":"unavailable","message":"the server is at its cap of open connections"}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// listLocked appends c to the evictable list. Must be called with t.mu held.
func (t *connTracker) listLocked(c *trackedConn, idle bool) {
	if c.listed || c.closed.Load() {
		return
	}
	c.listed, c.idle = true, idle
	c.prev, c.next = t.tail, nil
	if t.tail != nil {
		t.tail.next = c
	} else {
		t.head = c
	}
	t.tail = c
}

// unlistLocked removes c from the evictable list. Must be called with t.mu held.
func (t *connTracker) unlistLocked(c *trackedConn) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		t.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		t.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

// connState is the http.Server's ConnState hook: it moves connections in
// and out of the evictable list.
func (t *connTracker) connState(c net.Conn, state http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch state {
	case http.StateNew:
		// Listed by admit, at its accept time.
	case http.StateIdle:
		t.unlistLocked(tc) // a fresh position: idle since now
		t.listLocked(tc, true)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		t.unlistLocked(tc)
	}
}

func (t *connTracker) openConns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open
}

// Close closes the connection and frees its slot, once.
func (c *trackedConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return c.Conn.Close() // net.Conn's own error for a second close
	}
	t := c.t
	t.mu.Lock()
	t.unlistLocked(c)
	t.open--
	t.mu.Unlock()
	t.metrics.connsOpen.Dec()
	return c.Conn.Close()
}

// CloseWrite half-closes (net/http sends its FIN this way before closing a
// connection whose request body it did not read).
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn exposes the socket (for the send-queue probe, sendq.go).
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// limitListener admits accepted connections through a connTracker and
// turns TCP keepalive on.
type limitListener struct {
	net.Listener
	t *connTracker
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetKeepAliveConfig(keepAlive)
		}
		if tc := l.t.admit(c); tc != nil {
			return tc, nil
		}
	}
}
