package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// client is a simulated stream client of the session: it follows it from
// a cursor, may read slowly, disconnects, and resumes from the last seq it
// got (as Last-Event-ID does), across server crashes.
type client struct {
	id   int
	rng  *rand.Rand // its own: a reader's pace does not change the journal
	slow bool

	mu     sync.Mutex
	got    []*messages.Encoded // everything it received, in order, across reconnects
	cursor uint64
	sub    *actors.Subscription
	stop   chan struct{} // closed by disconnect: a slow reader stops waiting
	done   chan struct{} // closed when the reading goroutine returns
}

func newClient(id int, seed uint64) *client {
	return &client{id: id, rng: rand.New(rand.NewPCG(seed, uint64(id)+1))}
}

func (c *client) connected() bool { return c.sub != nil }

// connect subscribes after the client's cursor (or after, for a client
// that joins late) and reads on a goroutine until closed.
func (c *client) connect(ctx context.Context, e *actors.Engine, after uint64) error {
	if got, cur := c.received(); len(got) > 0 {
		after = cur
	}
	sub, err := e.Subscribe(ctx, messages.Subscribe{SessionID: session, After: after})
	if err != nil {
		return err
	}
	c.sub, c.stop, c.done = sub, make(chan struct{}), make(chan struct{})
	slow, pace := c.slow, time.Duration(c.rng.IntN(5_000_000)+1)
	go c.read(ctx, sub, slow, pace, c.stop, c.done)
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
		c.mu.Lock()
		c.got = append(c.got, buf...)
		c.cursor = buf[len(buf)-1].Seq
		c.mu.Unlock()
		if slow { // virtual time: a reader slower than the run
			t := time.NewTimer(pace)
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return
			}
		}
	}
}

// disconnect closes the stream and waits for the reader to stop.
func (c *client) disconnect() {
	if c.sub == nil {
		return
	}
	close(c.stop)
	c.sub.Close()
	<-c.done
	c.sub = nil
}

// received returns what the client got so far.
func (c *client) received() ([]*messages.Encoded, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got, c.cursor
}
