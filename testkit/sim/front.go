package sim

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/transport"
)

// front is the simulated server's HTTP face: a transport.Server on the
// current engine, serving on a pipeListener, and the HTTP and WebSocket
// clients that dial it. A crash replaces it with the engine; halt stops
// it, and everything it started has returned when stop does.
type front struct {
	srv    *transport.Server
	ln     *pipeListener
	served chan struct{} // closed when Serve has returned
	client *http.Client
	http   *http.Transport
	ws     *websocket.Dialer
}

// startFront serves e over HTTP on an in-memory listener. Its request ids
// come from a generator of its own: the engine's ids (and so the journal)
// do not depend on whether a simulation has HTTP clients.
func startFront(e *actors.Engine, log *slog.Logger, seed, epoch uint64) (*front, error) {
	ids := &idSource{rng: rand.NewChaCha8(idKey(seed^0x477b, epoch))}
	srv, err := transport.New(transport.Config{
		Engine: e, Logger: log, Now: time.Now, NewID: func() uuid.UUID { return ids.New() },
		// A bound of its own rather than one derived from RLIMIT_NOFILE:
		// the simulation opens no file descriptor for a connection.
		MaxConnections: 1024,
	})
	if err != nil {
		return nil, err
	}
	f := &front{srv: srv, ln: newPipeListener(), served: make(chan struct{})}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return f.ln.dial(ctx) }
	f.http = &http.Transport{DialContext: dial, DisableKeepAlives: true}
	f.client = &http.Client{Transport: f.http}
	f.ws = &websocket.Dialer{NetDialContext: dial}
	go func() { // owned by f: stop waits for it
		defer close(f.served)
		_ = srv.Serve(f.ln)
	}()
	return f, nil
}

// stop shuts the server down (every stream gets its final frame and is
// closed, its goroutines return) and waits for Serve to return.
func (f *front) stop(ctx context.Context) error {
	err := f.srv.Shutdown(ctx)
	_ = f.ln.Close()
	<-f.served
	f.http.CloseIdleConnections()
	if errors.Is(err, transport.ErrServerClosed) {
		err = nil
	}
	return err
}
