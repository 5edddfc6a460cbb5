package mcp_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/tool/mcp"
)

// memServer serves testServer in this process over net.Pipe, a new pipe
// and server session for every connection the client makes. Its crash
// tool closes the server's end of the pipe (the in-process kind of a
// crash: the connection is gone under the calls in flight); refuse makes
// the next connections fail.
type memServer struct {
	t       *testing.T
	started chan struct{} // a block call reached the server

	mu       sync.Mutex
	conns    int      // connections made
	refuse   int      // connections still to refuse
	serverIO net.Conn // the server's end of the live pipe
}

func newMemServer(t *testing.T) *memServer {
	return &memServer{t: t, started: make(chan struct{}, 16)}
}

var errRefused = errors.New("refused by the test")

// refusingTransport is a transport whose Connect fails.
type refusingTransport struct{}

func (refusingTransport) Connect(context.Context) (sdk.Connection, error) { return nil, errRefused }

func (m *memServer) transport() sdk.Transport {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conns++
	if m.refuse > 0 {
		m.refuse--
		return refusingTransport{}
	}
	c1, c2 := net.Pipe()
	m.serverIO = c2
	srv := testServer(func(context.Context) { m.started <- struct{}{} }, m.crash)
	if _, err := srv.Connect(context.Background(), &sdk.IOTransport{Reader: c2, Writer: c2}, nil); err != nil {
		m.t.Errorf("server connect: %v", err)
	}
	return &sdk.IOTransport{Reader: c1, Writer: c1}
}

func (m *memServer) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.serverIO.Close()
}

func (m *memServer) connections() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns
}

func (m *memServer) refuseNext(n int) {
	m.mu.Lock()
	m.refuse = n
	m.mu.Unlock()
}

// TestServers_InMemoryCrashRestartsWithBackoff runs in a synctest bubble:
// a server that dies under two calls (one blocked, one the crash itself)
// fails both with ErrServerDied; it is connected again exactly MinBackoff
// later, and after a second crash, which left the connection up less than
// MaxBackoff, 2×MinBackoff later; restarts that fail double the wait up
// to MaxBackoff. Calls while it is down fail at once with ErrServerDown.
func TestServers_InMemoryCrashRestartsWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		rec := newLogRecorder(t)
		s, err := mcp.Start(context.Background(), mcp.Config{
			Servers: []mcp.Spec{{Name: "m", Transport: ms.transport}}, Logger: rec.logger(),
			MinBackoff: time.Second, MaxBackoff: 8 * time.Second, PingInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}()
		if res, err := call(t, s, "m.echo", `{"message":"hi"}`); err != nil || res.Content != "echo: hi" {
			t.Fatalf("echo: %+v, %v", res, err)
		}

		// Crash 1, with a call in flight.
		inFlight := make(chan error, 1)
		go func() {
			_, err := call(t, s, "m.block", `{}`)
			inFlight <- err
		}()
		<-ms.started
		crashed := time.Now()
		if _, err := call(t, s, "m.crash", `{}`); !errors.Is(err, mcp.ErrServerDied) || !strings.Contains(err.Error(), "server m") {
			t.Errorf("the crashing call: %v, want ErrServerDied naming server m", err)
		}
		if err := <-inFlight; !errors.Is(err, mcp.ErrServerDied) || !strings.Contains(err.Error(), "tool block") {
			t.Errorf("the call in flight: %v, want ErrServerDied naming the tool", err)
		}
		synctest.Wait()
		if _, err := call(t, s, "m.echo", `{"message":"x"}`); !errors.Is(err, mcp.ErrServerDown) {
			t.Errorf("a call while down: %v, want ErrServerDown", err)
		}
		if n := ms.connections(); n != 1 {
			t.Errorf("%d connections before the backoff passed, want 1", n)
		}
		waitStatus(t, s, "m", func(st mcp.Status) bool { return st.Up && st.Restarts == 1 })
		if d := time.Since(crashed); d != time.Second {
			t.Errorf("restarted %v after the crash, want MinBackoff (1s)", d)
		}
		if res, err := call(t, s, "m.echo", `{"message":"back"}`); err != nil || res.Content != "echo: back" {
			t.Fatalf("echo after the restart: %+v, %v", res, err)
		}

		// Crash 2, soon after: the backoff has doubled.
		crashed = time.Now()
		if _, err := call(t, s, "m.crash", `{}`); !errors.Is(err, mcp.ErrServerDied) {
			t.Errorf("crash 2: %v", err)
		}
		waitStatus(t, s, "m", func(st mcp.Status) bool { return st.Up && st.Restarts == 2 })
		if d := time.Since(crashed); d != 2*time.Second {
			t.Errorf("restarted %v after crash 2, want 2s", d)
		}

		// Up for MaxBackoff: the backoff starts over. Crash 3 and three
		// refused restarts: 1s + 2s + 4s + 8s.
		time.Sleep(8 * time.Second) // virtual time: the bubble's clock
		ms.refuseNext(3)
		crashed = time.Now()
		if _, err := call(t, s, "m.crash", `{}`); !errors.Is(err, mcp.ErrServerDied) {
			t.Errorf("crash 3: %v", err)
		}
		waitStatus(t, s, "m", func(st mcp.Status) bool { return st.Up && st.Restarts == 3 })
		if d := time.Since(crashed); d != 15*time.Second {
			t.Errorf("restarted %v after crash 3 and three refusals, want 15s", d)
		}
		if !rec.has("mcp server restart failed", "refused by the test") {
			t.Error("the failed restarts were not logged")
		}
		if n := ms.connections(); n != 7 {
			t.Errorf("%d connections, want 7 (4 up, 3 refused)", n)
		}
	})
}

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan time.Duration // every Timer call's d
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Timer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1) // buffered: Advance never blocks on it
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), c: ch})
	c.armed <- d
	return ch, func() bool { return true }
}

// Advance moves the clock and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.now) {
			tm.c <- c.now
			continue
		}
		kept = append(kept, tm)
	}
	c.timers = kept
}

// TestServers_InjectedClock: the supervisor waits on Config.Clock, so a
// restart happens when that clock says so, not before.
func TestServers_InjectedClock(t *testing.T) {
	t.Parallel()
	ms := newMemServer(t)
	clock := &fakeClock{now: time.Unix(1e9, 0), armed: make(chan time.Duration, 64)}
	s := start(t, mcp.Config{
		Servers: []mcp.Spec{{Name: "m", Transport: ms.transport}}, Logger: newLogRecorder(t).logger(),
		MinBackoff: time.Minute, MaxBackoff: time.Hour, PingInterval: -1, Clock: clock,
		StopGrace: time.Hour, // the crashed call's grace timer is the fake clock's too
	})
	if _, err := call(t, s, "m.crash", `{}`); !errors.Is(err, mcp.ErrServerDied) {
		t.Fatalf("crash: %v", err)
	}
	// Wait for the supervisor to arm its backoff timer (a minute).
	for d := range clock.armed {
		if d == time.Minute {
			break
		}
	}
	if st := s.Status()[0]; st.Up || ms.connections() != 1 {
		t.Fatalf("status %+v, %d connections before the clock moved", st, ms.connections())
	}
	clock.Advance(time.Minute)
	waitStatus(t, s, "m", func(st mcp.Status) bool { return st.Up && st.Restarts == 1 })
}
