package natstest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Proxy relays client connections to a NATS server, and can lose one
// message the server sends a client: a reply (a publish acknowledgement)
// lost after the server acted on the request, as when a connection or a
// stream leader goes away between the two.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	match   func(subject string, data []byte) bool // armed by DropOnce; nil when disarmed
	dropped chan struct{}
	conns   []net.Conn
	wg      sync.WaitGroup // the relaying goroutines, waited for at the test's end
}

// StartProxy relays to s until the test ends.
func StartProxy(t testing.TB, s *server.Server) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("nats proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: s.Addr().String()}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// DropOnce makes the proxy drop the first message from the server to a
// client whose subject and payload (headers excluded) match, from now on;
// the channel is closed once it has. match runs on the relaying goroutine
// of the connection, before the message is dropped.
func (p *Proxy) DropOnce(match func(subject string, data []byte) bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.dropped = match, make(chan struct{})
	return p.dropped
}

// drop reports whether the message must be dropped (and disarms).
func (p *Proxy) drop(subject string, data []byte) bool {
	p.mu.Lock()
	match, dropped := p.match, p.dropped
	p.mu.Unlock()
	if match == nil || !match(subject, data) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped != dropped { // re-armed meanwhile
		return false
	}
	p.match = nil
	close(dropped)
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client to server, as is
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			_ = s.Close()
			_ = c.Close()
		}()
		go func() {
			defer p.wg.Done()
			_ = p.relay(c, bufio.NewReader(s))
			_ = s.Close()
			_ = c.Close()
		}()
	}
}

// relay copies the server's protocol to the client one operation at a
// time, leaving out the message drop selects. Messages are
// "MSG <subject> <sid> [reply] <size>" and "HMSG <subject> <sid> [reply]
// <header size> <size>", each followed by size bytes and CRLF; every other
// operation is one line.
func (p *Proxy) relay(to io.Writer, from *bufio.Reader) error {
	for {
		line, err := from.ReadBytes('\n')
		if err != nil {
			return err
		}
		f := bytes.Fields(line)
		if len(f) < 4 || (string(f[0]) != "MSG" && string(f[0]) != "HMSG") {
			if _, err := to.Write(line); err != nil {
				return err
			}
			continue
		}
		size, err := strconv.Atoi(string(f[len(f)-1]))
		if err != nil {
			return err
		}
		hdr := 0
		if string(f[0]) == "HMSG" {
			if hdr, err = strconv.Atoi(string(f[len(f)-2])); err != nil {
				return err
			}
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(from, body); err != nil {
			return err
		}
		if p.drop(string(f[1]), body[hdr:size]) {
			continue
		}
		if _, err := to.Write(append(line, body...)); err != nil {
			return err
		}
	}
}
