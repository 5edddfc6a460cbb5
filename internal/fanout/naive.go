package fanout

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

// naiveTarget is the baseline broadcaster that fan-out servers usually
// start as: every client has a goroutine (its request handler) and a
// buffered channel; the publisher does a non-blocking send to every channel
// (dropping and counting the event when it is full); each handler writes
// and flushes once per event (SSE) or sends one frame per event (gorilla
// WebSocket). Events are encoded once and framed exactly as Conclave frames
// them, so both servers put the same bytes on the wire.
type naiveTarget struct {
	cfg      ServerConfig
	http     *http.Server
	lis      net.Listener
	upgrader websocket.Upgrader
	serve    routine.Group // Serve and the WebSocket readers
	// wsHandlers counts WebSocket handlers, which http.Server.Shutdown does
	// not wait for once they hijacked their connection. Each Add happens
	// before the hijack, so before Shutdown returns, and so before Wait.
	wsHandlers sync.WaitGroup
	done       chan struct{} // closed by shutdown: handlers return
	closed     atomic.Bool

	mu    sync.RWMutex // guards subs
	subs  map[*naiveSub]struct{}
	seq   uint64 // publisher-owned
	drops atomic.Int64
	wrote atomic.Int64
}

// naiveSub is one client's queue. Its capacity is cfg.Queue.
type naiveSub struct{ ch chan *messages.Encoded }

var _ target = (*naiveTarget)(nil)

func startNaive(cfg ServerConfig) (*naiveTarget, error) {
	t := &naiveTarget{cfg: cfg, done: make(chan struct{}), subs: map[*naiveSub]struct{}{},
		upgrader: websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", t.sse)
	mux.HandleFunc("GET /ws", t.ws)
	t.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var err error
	if t.lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	t.serve.Go(func() { _ = t.http.Serve(t.lis) })
	return t, nil
}

func (t *naiveTarget) ready() Ready {
	return Ready{Stream: t.lis.Addr().String(), SSEPath: "/stream", WSPath: "/ws"}
}

func (t *naiveTarget) subscribe() *naiveSub {
	s := &naiveSub{ch: make(chan *messages.Encoded, t.cfg.Queue)}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.mu.Unlock()
	return s
}

func (t *naiveTarget) unsubscribe(s *naiveSub) {
	t.mu.Lock()
	delete(t.subs, s)
	t.mu.Unlock()
}

func (t *naiveTarget) publish(_ context.Context, payload string) error {
	t.seq++
	env := benchEmit(payload).Stamp(uuid.New(), t.seq, t.cfg.Now(), sessionID)
	enc, err := messages.Encode(env)
	if err != nil {
		return err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for s := range t.subs {
		select {
		case s.ch <- enc:
		default:
			t.drops.Add(1)
		}
	}
	return nil
}

func (t *naiveTarget) counts() targetCounts {
	t.mu.RLock()
	n := len(t.subs)
	t.mu.RUnlock()
	// catchup is 0: the naive server has no journal to catch up from.
	return targetCounts{clients: n, writes: t.wrote.Load(), dropped: t.drops.Load()}
}

// sse serves one SSE client: one Write and one Flush per event.
func (t *naiveTarget) sse(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	s := t.subscribe()
	defer t.unsubscribe(s)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-t.done:
			return
		case e := <-s.ch:
			if _, err := w.Write(e.SSEFrame()); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			t.wrote.Add(1)
		}
	}
}

// ws serves one WebSocket client: one WriteMessage per event, and a reader
// goroutine that handles control frames (gorilla needs one).
func (t *naiveTarget) ws(w http.ResponseWriter, r *http.Request) {
	t.wsHandlers.Add(1)
	defer t.wsHandlers.Done()
	conn, err := t.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	gone := make(chan struct{})
	if !t.serve.Go(func() {
		defer close(gone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}) {
		return
	}
	defer func() { _ = conn.Close(); <-gone }()
	s := t.subscribe()
	defer t.unsubscribe(s)
	for {
		select {
		case <-gone:
			return
		case <-t.done:
			_ = conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
			return
		case e := <-s.ch:
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, e.JSON); err != nil {
				return
			}
			t.wrote.Add(1)
		}
	}
}

// shutdown ends every handler (http.Server.Shutdown does not end streaming
// handlers or hijacked connections by itself) and waits for them.
func (t *naiveTarget) shutdown(ctx context.Context) error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(t.done)
	err := t.http.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	t.serve.Go(t.wsHandlers.Wait) // so that Wait below also waits for the handlers, within ctx
	t.serve.Close()
	if werr := t.serve.Wait(ctx); err == nil {
		err = werr
	}
	return err
}
