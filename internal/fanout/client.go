package fanout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/routine"
)

// Client buffer sizes: large reads keep the clients' share of the CPU
// small, so that the machine's cores go to the server under test.
const (
	clientReadBuffer = 32 << 10
	clientFrameLimit = 1 << 20
	dialTimeout      = 10 * time.Second
	dialParallelism  = 16
)

// streamClient is one connection's tally. The fields below received are
// owned by the connection's reader goroutine and read only after it ended.
type streamClient struct {
	received atomic.Int64 // events in seq order, read by the harness while it runs

	last      uint64 // last seq received
	gaps      int64  // events skipped over (a seq jumped)
	dups      int64  // events at or below the last seq
	unstamped int64  // events without a payload stamp
	lastAt    time.Time
	hist      benchkit.Histogram
	err       error // why the stream ended before the harness closed it
}

// record counts the event seq, stamped at stamp (unix ns; ok false when
// missing), which the client read at readAt.
func (c *streamClient) record(seq uint64, stamp int64, stamped bool, readAt time.Time) {
	switch {
	case seq <= c.last:
		c.dups++
		return
	case seq > c.last+1:
		c.gaps += int64(seq - c.last - 1)
	}
	c.last = seq
	c.lastAt = readAt
	if stamped {
		c.hist.Record(time.Duration(readAt.UnixNano() - stamp))
	} else {
		c.unstamped++
	}
	c.received.Add(1)
}

// clientPool holds the benchmark's stream connections.
type clientPool struct {
	clients []*streamClient
	stampOf func([]byte) (int64, bool) // FindStamp or FindTimestamp; safe for concurrent use
	readers routine.Group
	closing atomic.Bool

	mu    sync.Mutex // guards conns
	conns []io.Closer
}

// clientTotals sums a pool's tallies.
type clientTotals struct {
	received, gaps, dups, unstamped int64
	tail                            int64 // events after each client's last one, up to the final seq
	disconnected                    int
	firstErr                        error
	lastAt                          time.Time
	hist                            benchkit.Histogram
}

// connectClients opens n streams of kind tr, to the servers described by
// rs in turn (one, or a cluster's nodes).
// Every client expects the events after r.After, and finds each event's
// send time (unix ns) in its envelope with stampOf. On error, the streams
// opened so far are closed.
func connectClients(ctx context.Context, n int, tr Transport, rs []Ready, now func() time.Time,
	stampOf func([]byte) (int64, bool)) (*clientPool, error) {
	p := &clientPool{clients: make([]*streamClient, n), stampOf: stampOf}
	var (
		next    atomic.Int64
		errOnce sync.Once
		dialErr error
		dialers routine.Group
	)
	for range min(n, dialParallelism) {
		dialers.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				r := rs[i%len(rs)] // spread over the cluster's nodes
				c := &streamClient{last: r.After}
				p.clients[i] = c
				if err := p.open(ctx, c, tr, r, now); err != nil {
					errOnce.Do(func() { dialErr = fmt.Errorf("fanout: client %d: %w", i, err) })
					next.Store(int64(n)) // stop the other dialers
					return
				}
			}
		})
	}
	_ = dialers.Wait(context.Background()) // each dial is bounded by dialTimeout
	if dialErr == nil {
		dialErr = ctx.Err()
	}
	if dialErr != nil {
		p.close()
		return nil, dialErr
	}
	return p, nil
}

// open connects c and starts its reader.
func (p *clientPool) open(ctx context.Context, c *streamClient, tr Transport, r Ready, now func() time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var (
		conn io.Closer
		read func()
	)
	switch tr {
	case TransportSSE:
		nc, body, err := benchkit.DialSSE(ctx, r.Stream, r.SSEPath, nil)
		if err != nil {
			return err
		}
		conn, read = nc, func() { p.ended(c, readSSE(c, body, now, p.stampOf)) }
	case TransportWS:
		d := websocket.Dialer{ReadBufferSize: clientReadBuffer, WriteBufferSize: 512, HandshakeTimeout: dialTimeout}
		ws, resp, err := d.DialContext(ctx, "ws://"+r.Stream+r.WSPath, nil)
		if err != nil {
			if resp != nil {
				err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
			}
			return err
		}
		conn, read = ws, func() { p.ended(c, readWS(c, ws, now, p.stampOf)) }
	default:
		return fmt.Errorf("fanout: unknown transport %q", tr)
	}
	p.mu.Lock()
	p.conns = append(p.conns, conn)
	p.mu.Unlock()
	if !p.readers.Go(read) {
		return conn.Close()
	}
	return nil
}

// ended is called by c's reader when its stream ended with err.
func (p *clientPool) ended(c *streamClient, err error) {
	if !p.closing.Load() {
		c.err = err
	}
}

// readSSE tallies SSE frames until the stream ends. The seq is the frame's
// id; frames without one (heartbeats, the final frame) are not events.
func readSSE(c *streamClient, body io.Reader, now func() time.Time, stampOf func([]byte) (int64, bool)) error {
	sc := benchkit.NewSSEScanner(body, clientReadBuffer, clientFrameLimit, now)
	for {
		f, err := sc.Next()
		if err != nil {
			return err
		}
		if f.Data == nil || len(f.ID) == 0 {
			continue
		}
		seq, ok := parseUint(f.ID)
		if !ok {
			continue
		}
		stamp, stamped := stampOf(f.Data)
		c.record(seq, stamp, stamped, f.ReadAt)
	}
}

// readWS tallies WebSocket messages until the connection ends. A message
// holds one envelope or several, one per line.
func readWS(c *streamClient, ws *websocket.Conn, now func() time.Time, stampOf func([]byte) (int64, bool)) error {
	buf := make([]byte, 0, clientReadBuffer)
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				if cap(buf) >= clientFrameLimit {
					return benchkit.ErrFrameTooLong
				}
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		at := now()
		for msg := buf; len(msg) > 0; {
			line := msg
			if i := bytes.IndexByte(msg, '\n'); i >= 0 {
				line, msg = msg[:i], msg[i+1:]
			} else {
				msg = nil
			}
			seq, ok := FindSeq(line)
			if !ok {
				continue
			}
			stamp, stamped := stampOf(line)
			c.record(seq, stamp, stamped, at)
		}
	}
}

// received is the number of events all clients received so far.
func (p *clientPool) received() int64 {
	var n int64
	for _, c := range p.clients {
		n += c.received.Load()
	}
	return n
}

// close ends every stream and waits for the readers.
func (p *clientPool) close() {
	p.closing.Store(true)
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	p.readers.Close()
	_ = p.readers.Wait(context.Background()) // a closed connection ends its reader
}

// totals sums the tallies; call it after close. final is the seq of the
// last published event: a client whose last seq is lower missed the rest.
func (p *clientPool) totals(final uint64) clientTotals {
	var t clientTotals
	for _, c := range p.clients {
		if c == nil {
			continue
		}
		t.received += c.received.Load()
		t.gaps += c.gaps
		t.dups += c.dups
		t.unstamped += c.unstamped
		if final > c.last {
			t.tail += int64(final - c.last)
		}
		if c.lastAt.After(t.lastAt) {
			t.lastAt = c.lastAt
		}
		t.hist.Merge(&c.hist)
		if c.err != nil {
			t.disconnected++
			if t.firstErr == nil {
				t.firstErr = c.err
			}
		}
	}
	return t
}
