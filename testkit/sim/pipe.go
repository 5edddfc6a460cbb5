package sim

import (
	"context"
	"errors"
	"net"
	"sync"
)

// pipeListener is a net.Listener inside the simulation's bubble: dial
// hands the server's end of a net.Pipe to Accept and returns the other
// end. No socket, no goroutine of its own; everything it blocks on is a
// channel of the bubble, so synctest sees a waiting server as quiet.
type pipeListener struct {
	conns chan net.Conn // unbuffered: dial returns once Accept took the server's end
	done  chan struct{} // closed by Close
	once  sync.Once

	mu     sync.Mutex // guards served
	served []net.Conn // the server's ends handed out, for cut
}

var _ net.Listener = (*pipeListener)(nil)

// errListenerClosed is what Accept and dial return after Close.
var errListenerClosed = errors.New("sim: pipe listener closed")

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errListenerClosed
	}
}

// Close stops Accept and dial; connections already handed out stay open.
// Idempotent.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects to the listener: the server's end goes to Accept.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		l.mu.Lock()
		l.served = append(l.served, server)
		l.mu.Unlock()
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = server.Close()
	_ = client.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errListenerClosed
}

// cut closes the server's end of every connection handed out, as the
// death of the server's process does: its clients read the end of their
// streams, with no final frame. Closing a pipe twice is harmless.
func (l *pipeListener) cut() {
	l.mu.Lock()
	conns := l.served
	l.served = nil
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// pipeAddr is the address of a pipeListener.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "sim" }
