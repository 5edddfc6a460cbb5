// Package mcp connects Conclave to MCP tool servers through the official
// Go SDK (github.com/modelcontextprotocol/go-sdk): stdio servers run as
// child processes, streamable HTTP servers are reached by URL. Each
// server's tools become agent tools named "SERVER.tool" (see Servers).
//
// A server that goes down — its process exits, its connection drops, a
// ping fails — is restarted with exponential backoff. Calls in flight
// when it goes down fail with ErrServerDied; calls while it is down fail
// at once with ErrServerDown. The tools are the ones the server listed at
// Start: a restarted server that lists others keeps the first list (with
// a warning), since an engine's tool set is fixed.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/tool"
)

// Config configures Start. Every field but Servers has a valid zero value.
type Config struct {
	// Servers to connect to; names must be unique.
	Servers []Spec
	// Logger gets the servers' life (started, down, restarted), the tools
	// left out and, at debug level, stdio servers' stderr.
	Logger *slog.Logger
	// ConnectTimeout bounds one connection attempt: starting the process
	// or reaching the URL, the MCP handshake and listing the tools.
	// Default 30s.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before each restart
	// attempt: MinBackoff first, doubled after every failed attempt, at
	// most MaxBackoff. A connection that stayed up MaxBackoff starts over
	// from MinBackoff. Defaults 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often a live server is pinged; a failed ping
	// takes it down (and restarts it). Default 30s; negative: no pings.
	PingInterval time.Duration
	// StopGrace is how long a stdio server has to exit once its stdin is
	// closed, and then once it got SIGTERM, before SIGKILL. Default 2s.
	StopGrace time.Duration
	// MaxResultBytes bounds the text of one call's result; the rest is cut
	// with a note. Default 1 MiB.
	MaxResultBytes int
	// MaxMessageBytes bounds one message from a server (a JSON-RPC line
	// over stdio, an event over HTTP); a larger one breaks the connection.
	// Default 8 MiB.
	MaxMessageBytes int
	// MaxTools bounds the tools taken from one server; the rest are left
	// out with a warning. Default 128.
	MaxTools int
	// HTTPClient reaches streamable HTTP servers. Default: a client with
	// dial and TLS handshake timeouts of 10s (no overall timeout: a call's
	// context bounds it).
	HTTPClient *http.Client
	// Env is the base environment of every stdio server (each adds its
	// Spec.Env); nil means DefaultEnv(os.Environ()): only HOME, LOGNAME,
	// PATH, SHELL, TERM and USER, so that no secret of this process
	// reaches a tool server unless the operator passes it.
	Env []string
	// Clock times the backoff, the stop grace and how long a connection
	// stayed up. Default: the real clock.
	Clock Clock
}

// Defaults of Config.
const (
	DefaultConnectTimeout  = 30 * time.Second
	DefaultMinBackoff      = 500 * time.Millisecond
	DefaultMaxBackoff      = 30 * time.Second
	DefaultPingInterval    = 30 * time.Second
	DefaultStopGrace       = 2 * time.Second
	DefaultMaxResultBytes  = 1 << 20
	DefaultMaxMessageBytes = 8 << 20
	DefaultMaxTools        = 128
)

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxTools <= 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}}
	}
	if c.Env == nil {
		c.Env = DefaultEnv(os.Environ())
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

// Errors of calls.
var (
	// ErrServerDown: the server is down (being restarted); the call was
	// not sent.
	ErrServerDown = errors.New("mcp: server is down")
	// ErrServerDied: the server went down while the call was in flight.
	ErrServerDied = errors.New("mcp: server went down during the call")
	// ErrClosed: the servers were shut down.
	ErrClosed = errors.New("mcp: servers shut down")
)

// Servers are connected MCP servers and their tools. Start them with
// Start and stop them with Shutdown. Safe for concurrent use.
type Servers struct {
	cfg     Config
	log     *slog.Logger
	servers []*server
	tools   []tool.Tool

	// ctx ends at Shutdown: the supervisors stop their connections.
	ctx    context.Context
	cancel context.CancelFunc
	// hurry ends when a Shutdown's deadline passed: processes still
	// stopping are killed at once.
	hurry       context.Context
	hurryCancel context.CancelFunc
	group       routine.Group // supervisors, watchers, stderr readers

	shutMu sync.Mutex // serialises Shutdown
	closed atomic.Bool
	done   chan struct{}

	changeMu sync.Mutex    // guards changed
	changed  chan struct{} // closed and replaced at every status change
}

// Start connects to every server of cfg and lists its tools. A server
// that cannot be started, reached or listed within ConnectTimeout (or
// before ctx ends) is an error naming it; the servers already started are
// then stopped.
func Start(ctx context.Context, cfg Config) (*Servers, error) {
	cfg = cfg.withDefaults()
	names := map[string]bool{}
	for _, sp := range cfg.Servers {
		if err := sp.check(); err != nil {
			return nil, err
		}
		if names[sp.Name] {
			return nil, fmt.Errorf("%w: two servers are named %s", ErrSpec, sp.Name)
		}
		names[sp.Name] = true
	}
	s := &Servers{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), changed: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hurry, s.hurryCancel = context.WithCancel(context.Background())
	for _, sp := range cfg.Servers {
		v := newServer(s, sp)
		c, list, err := v.connect(ctx)
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 2*cfg.StopGrace+time.Second)
			_ = s.Shutdown(sctx)
			cancel()
			return nil, fmt.Errorf("mcp: server %s (%s): %w", sp.Name, sp, err)
		}
		s.servers = append(s.servers, v)
		s.tools = append(s.tools, v.adopt(list)...)
		v.setLive(c, false)
		v.log.Info("mcp server up", "tools", len(v.tools))
		if !s.group.Go(func() { v.supervise(c) }) {
			v.closeConn(c, ErrClosed) // unreachable: nothing shuts s down during Start
		}
	}
	return s, nil
}

// Tools returns the servers' tools, server by server in Config order,
// each server's in the order it listed them.
func (s *Servers) Tools() []tool.Tool { return append([]tool.Tool(nil), s.tools...) }

// Status is a server's state.
type Status struct {
	Name string
	Up   bool
	// Restarts counts the restarts that succeeded.
	Restarts int
	// Down says why the server is down ("" while up).
	Down string
	// Tools is the number of its tools in the engine.
	Tools int
}

// Status returns every server's state, in Config order.
func (s *Servers) Status() []Status {
	out := make([]Status, len(s.servers))
	for i, v := range s.servers {
		out[i] = v.status()
	}
	return out
}

// Changed returns a channel closed at the next change of any server's
// status (up, down, restarted).
func (s *Servers) Changed() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	return s.changed
}

func (s *Servers) notify() {
	s.changeMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changeMu.Unlock()
}

// Shutdown stops every server: calls in flight fail with ErrClosed,
// stdio servers get their stdin closed, then SIGTERM, then SIGKILL (see
// Config.StopGrace), and every goroutine of the package returns. It is
// idempotent. When ctx ends first, the processes still running are killed
// at once and Shutdown returns ctx's error; calling it again waits for the
// rest.
func (s *Servers) Shutdown(ctx context.Context) error {
	s.shutMu.Lock()
	defer s.shutMu.Unlock()
	select {
	case <-s.done:
		return nil
	default:
	}
	s.closed.Store(true)
	s.cancel()
	s.group.Close()
	if err := s.group.Wait(ctx); err != nil {
		s.hurryCancel()
		return err
	}
	s.hurryCancel()
	if t, ok := s.cfg.HTTPClient.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	close(s.done)
	return nil
}

// Done is closed once Shutdown has stopped everything.
func (s *Servers) Done() <-chan struct{} { return s.done }

// clientVersion is this build's module version, for the MCP handshake.
var clientVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}()

func newClient(log *slog.Logger, ping time.Duration, progress func(*sdk.ProgressNotificationParams)) *sdk.Client {
	opts := &sdk.ClientOptions{
		Logger: log,
		// No roots, sampling or elicitation: Conclave only calls tools.
		Capabilities: &sdk.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			progress(req.Params)
		},
	}
	if ping > 0 {
		opts.KeepAlive = ping
	}
	return sdk.NewClient(&sdk.Implementation{Name: "conclave", Version: clientVersion}, opts)
}
