package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// clientKind is how a simulated client reaches the session's events.
type clientKind int

const (
	// direct subscribes on the engine (actors.Engine.Subscribe).
	direct clientKind = iota
	// sse reads GET /api/v1/events/stream through the transport server.
	sse
	// ws reads GET /api/v1/events/ws through the transport server.
	ws
)

func (k clientKind) String() string {
	return [...]string{"direct", "sse", "ws"}[k]
}

// client is a simulated stream client of the session: it follows it from
// a cursor, may read slowly, disconnects, and resumes from the last seq it
// got (as Last-Event-ID does), across server crashes. A direct client
// subscribes on the engine; an SSE or WebSocket one goes through the real
// transport handlers over an in-memory connection (httpclient.go).
type client struct {
	id   int
	kind clientKind
	rng  *rand.Rand // its own: a reader's pace does not change the journal
	slow bool

	mu     sync.Mutex
	got    []*messages.Encoded // everything it received, in order, across reconnects
	cursor uint64
	// closed counts the final frames (SSE stream_closed, WebSocket close
	// frames) the server ended this client's streams with, by code.
	closed map[string]int
	// bad is what the client could not make sense of in a stream (a frame
	// without an id, an undecodable line): a failure of the simulation.
	bad []string

	// restart is a WebSocket client's subscribe frame whose restart it
	// has not seen yet (under mu; see resubscribe).
	restart  *restart
	restarts int // restarts seen (under mu)

	// on: connected, as the driver sees it (connect succeeded, and
	// neither disconnect nor park ran since). open: a connection is open
	// and read; a parked WebSocket client's is open while it is not on.
	on, open bool
	// at names the cluster node the client's stream is on (cluster mode:
	// any node, which follows the session from the shared journal).
	at   string
	sub  *actors.Subscription // a direct client's
	wsc  *websocket.Conn      // a WebSocket client's
	stop chan struct{}        // closed by disconnect: a slow reader stops waiting
	hang func()               // closes an HTTP client's connection
	done chan struct{}        // closed when the reading goroutine returns
}

func newClient(id int, seed uint64, kind clientKind) *client {
	return &client{id: id, kind: kind, rng: rand.New(rand.NewPCG(seed, uint64(id)+1)), closed: map[string]int{}}
}

func (c *client) connected() bool { return c.on }

// connect subscribes after the client's cursor (or after, for a client
// that joins late) and reads on a goroutine until closed. It returns once
// the server has subscribed the stream: what the client does next cannot
// race the driver's next step.
func (c *client) connect(ctx context.Context, w *world, after uint64) error {
	resume := false
	if got, cur := c.received(); len(got) > 0 {
		after, resume = cur, true
	}
	if c.open && resume && c.resubscribe() {
		c.on = true // a parked WebSocket client restarted its stream on the open connection
		return nil
	}
	c.disconnect()
	slow, pace := c.slow, time.Duration(c.rng.IntN(5_000_000)+1)
	stop, done := make(chan struct{}), make(chan struct{})
	e, front := w.e, w.front
	if w.cl != nil { // any node serves a stream (cluster.Followers): drawn from the client's generator
		n := w.cl.nodes[c.rng.IntN(len(w.cl.nodes))]
		e, front, c.at = n.e, n.front, n.name
	}
	var err error
	switch c.kind {
	case direct:
		err = c.connectDirect(ctx, e, after, slow, pace, stop, done)
	case sse:
		if front == nil {
			return fmt.Errorf("client %d: no HTTP server", c.id)
		}
		// A resume sends Last-Event-ID, as EventSource does, three times in
		// four; else ?after=, as a client that keeps its own cursor.
		header := resume && c.rng.IntN(4) != 0
		err = c.connectSSE(ctx, front, after, header, slow, pace, stop, done)
	case ws:
		if front == nil {
			return fmt.Errorf("client %d: no HTTP server", c.id)
		}
		err = c.connectWS(ctx, front, after, slow, pace, stop, done)
	}
	if err != nil {
		return err
	}
	c.on, c.open, c.stop, c.done = true, true, stop, done
	return nil
}

func (c *client) connectDirect(ctx context.Context, e *actors.Engine, after uint64, slow bool, pace time.Duration, stop, done chan struct{}) error {
	sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: session, After: after})
	if err != nil {
		return err
	}
	c.sub = sub
	go c.read(ctx, sub, slow, pace, stop, done) // owned by c: disconnect waits for it
	return nil
}

// read receives until the subscription ends or stop is closed. Its pace
// must not hold up the driver: how many events each read gets depends on
// the Go scheduler, so how long a slow reader has been sleeping is not
// deterministic, and disconnect does not wait for that sleep to end.
func (c *client) read(ctx context.Context, sub *actors.Subscription, slow bool, pace time.Duration, stop, done chan struct{}) {
	defer close(done)
	buf := make([]*messages.Encoded, 0, 64)
	for {
		var err error
		buf, err = sub.Next(ctx, buf[:0], 64)
		if err != nil {
			return
		}
		c.add(buf...)
		if slow && !pause(pace, stop) {
			return
		}
	}
}

// pause waits pace of virtual time (a reader slower than the run); false
// if stop was closed meanwhile.
func pause(pace time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(pace)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// add records events received.
func (c *client) add(evs ...*messages.Encoded) {
	if len(evs) == 0 {
		return
	}
	c.mu.Lock()
	c.got = append(c.got, evs...)
	c.cursor = evs[len(evs)-1].Seq
	c.mu.Unlock()
}

// closedWith records a final frame the server sent.
func (c *client) closedWith(code string) {
	c.mu.Lock()
	c.closed[code]++
	c.mu.Unlock()
}

// misread records something the client could not make sense of.
func (c *client) misread(format string, args ...any) {
	c.mu.Lock()
	c.misreadLocked(format, args...)
	c.mu.Unlock()
}

// misreadLocked: must be called with mu held.
func (c *client) misreadLocked(format string, args ...any) {
	if len(c.bad) < 5 {
		c.bad = append(c.bad, fmt.Sprintf(format, args...))
	}
}

// park is a WebSocket client's disconnect move that keeps its connection
// open (and read): the next connect restarts the stream on it with a
// subscribe frame instead of dialing (resubscribe). To the driver it is
// disconnected, as after disconnect, so that its choices (which depend
// on whether a client is connected) stay those of a seed without HTTP
// clients.
func (c *client) park() { c.on = false }

// disconnect closes the stream and waits for the reader to stop.
func (c *client) disconnect() {
	c.on = false
	if !c.open {
		return
	}
	close(c.stop)
	if c.sub != nil {
		c.sub.Close()
		c.sub = nil
	}
	if c.hang != nil {
		c.hang()
		c.hang = nil
	}
	<-c.done
	c.open, c.wsc = false, nil
	c.mu.Lock()
	c.restart = nil
	c.mu.Unlock()
}

// received returns what the client got so far.
func (c *client) received() ([]*messages.Encoded, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got, c.cursor
}

// problems returns what the client could not make sense of.
func (c *client) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bad
}
