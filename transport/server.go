// Package transport is Conclave's HTTP face: the runs API, the SSE and
// WebSocket event streams with resume, bearer-token tenants, and metrics.
// See docs/api.md for the wire contract.
//
// Streams are built for fan-out. After a stream request is validated the
// connection is taken over from net/http, and it holds no goroutine while
// it has nothing to send: the session hub wakes it when events arrive, a
// writer goroutine then sends everything pending in one write, and exits
// once the connection has been idle for a while (stream.go).
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/agui"
)

// Config configures a Server. Only Engine is required.
type Config struct {
	Engine *actors.Engine
	// Tokens maps bearer tokens to tenants. Empty: no authentication, and
	// Listen refuses any address that is not loopback.
	Tokens Tokens
	Logger *slog.Logger
	Now    func() time.Time
	// Heartbeat is the interval of SSE comment heartbeats and WebSocket
	// pings on idle streams. Default 10 s.
	Heartbeat time.Duration
	// FlushDelay lets a woken stream wait this long before it writes, so
	// events arriving meanwhile share one write. Default 0 (write at once);
	// a few milliseconds trade latency for far fewer syscalls under load.
	FlushDelay time.Duration
	// WriteTimeout bounds one write to a stream; a client that accepts
	// nothing for this long is disconnected. Default 30 s.
	WriteTimeout time.Duration
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may open WebSockets and read the API cross-origin. "*" allows any.
	// Requests without an Origin header (non-browsers) are always allowed.
	AllowedOrigins []string
	// MaxBody bounds request bodies. Default 1 MiB.
	MaxBody int64
	// WSReadLimit bounds a WebSocket client frame. Default 4 KiB.
	WSReadLimit int64
	// IdempotencyTTL is how long an Idempotency-Key is remembered. Default 24 h.
	IdempotencyTTL time.Duration
	// Registry receives the server's metrics. Default: a new registry.
	Registry *prometheus.Registry
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.WSReadLimit == 0 {
		c.WSReadLimit = 4 << 10
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return c
}

// DefaultFlushDelay is the coalescing window conclave serve uses: a woken
// stream waits this long so the events arriving meanwhile share one write.
// 5 ms keeps p99 under 50 ms at 1.5M deliveries/s on 2 cores, where
// writing each event at once saturates on write syscalls (BENCHMARKS.md).
const DefaultFlushDelay = 5 * time.Millisecond

// ErrInsecureBind is returned by Listen for a non-loopback address without tokens.
var ErrInsecureBind = errors.New("transport: refusing to listen on a non-loopback address without tokens (configure tokens, or bind 127.0.0.1)")

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = http.ErrServerClosed

// Server serves the API and the streams.
type Server struct {
	cfg     Config
	engine  *actors.Engine
	mux     *http.ServeMux
	http    *http.Server
	metrics *metrics
	idem    *idempotency
	streams *streamSet
	a2a     *a2a.Handler  // A2A agent card and JSON-RPC (transport/a2a)
	writers routine.Group // stream writer goroutines and the heartbeat loop

	closing  atomic.Bool
	shutOnce sync.Once
	stopBeat chan struct{}
}

// New builds a server. It does not listen; see Listen and Serve, or use Handler.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("transport: Config.Engine is required")
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg: cfg, engine: cfg.Engine, mux: http.NewServeMux(),
		idem:     newIdempotency(cfg.IdempotencyTTL, cfg.Now),
		streams:  newStreamSet(),
		stopBeat: make(chan struct{}),
	}
	m, err := newMetrics(cfg.Registry, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.a2a, err = a2a.New(a2a.Config{
		Engine: cfg.Engine, Logger: cfg.Logger, Heartbeat: cfg.Heartbeat, WriteTimeout: cfg.WriteTimeout,
		MaxBody: cfg.MaxBody, BearerAuth: cfg.Tokens.Len() > 0, Authenticate: s.authenticateA2A,
	}); err != nil {
		return nil, err
	}
	s.routes()
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.writers.Go(s.heartbeatLoop)
	return s, nil
}

// Handler returns the HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.cors(s.mux) }

func (s *Server) routes() {
	s.mux.HandleFunc("/api/v1/runs", s.methods(map[string]http.HandlerFunc{
		http.MethodPost: s.authed(s.createRun), http.MethodGet: s.authed(s.listRuns)}))
	s.mux.HandleFunc("/api/v1/runs/{id}", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(s.getRun)}))
	s.mux.HandleFunc("/api/v1/runs/{id}/abort", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(s.abortRun)}))
	s.mux.HandleFunc("/api/v1/runs/{id}/steer", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(s.steerRun)}))
	s.mux.HandleFunc("/api/v1/runs/{id}/rewind", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(s.rewindRun)}))
	s.mux.HandleFunc("/api/v1/events/stream", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(s.sseStream)}))
	s.mux.HandleFunc("/api/v1/events/ws", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(s.wsStream)}))
	s.mux.HandleFunc("/api/v1/events/resume/{id}", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(s.resume)}))
	s.mux.HandleFunc("/api/v1/interrupts", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(s.listInterrupts)}))
	s.mux.HandleFunc("/api/v1/interrupts/{id}", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(s.getInterrupt)}))
	s.mux.HandleFunc("/api/v1/interrupts/{id}/resume", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(s.resume)}))
	s.mux.HandleFunc("/api/v1/agui", s.methods(map[string]http.HandlerFunc{http.MethodPost: s.authed(
		agui.New(agui.Config{Engine: s.engine, Logger: s.cfg.Logger, Now: s.cfg.Now}).ServeTenant)}))
	s.mux.Handle(a2a.CardPath, s.a2a.Card())
	s.mux.Handle(a2a.RPCPath, s.a2a.RPC())
	s.mux.HandleFunc("/healthz", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.healthz}))
	s.mux.Handle("/metrics", s.methods(map[string]http.HandlerFunc{http.MethodGet: s.metrics.handler().ServeHTTP}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "no such endpoint: "+r.URL.Path))
	})
}

type tenantKey struct{}

// authedHandler receives the caller's tenant.
type authedHandler func(w http.ResponseWriter, r *http.Request, tenant messages.TenantID)

func (s *Server) authed(h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, err := s.authenticate(r)
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, tenant)
	}
}

// methods dispatches on the method and answers others with a JSON 405.
func (s *Server) methods(byMethod map[string]http.HandlerFunc) http.HandlerFunc {
	allow := strings.Join(slices.Sorted(maps.Keys(byMethod)), ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := byMethod[r.Method]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Allow", allow)
		writeError(w, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed here; use "+allow))
	}
}

func (s *Server) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || o == origin {
			return true
		}
	}
	return false
}

// cors answers preflights and adds CORS headers for allowed origins.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && s.originAllowed(origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, A2A-Version, A2A-Extensions")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Listen opens addr, refusing a non-loopback address when no tokens are
// configured. Port 0 picks a free port; the returned listener's Addr says which.
func (s *Server) Listen(addr string) (net.Listener, error) {
	if s.cfg.Tokens.Len() == 0 && !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: %s", ErrInsecureBind, addr)
	}
	return net.Listen("tcp", addr)
}

// Serve serves HTTP on l until Shutdown; then it returns ErrServerClosed.
func (s *Server) Serve(l net.Listener) error { return s.http.Serve(l) }

// Shutdown stops the server: no new requests or streams, every open stream
// gets its final frame and is closed, and every goroutine of the server has
// returned. Shut the engine down first so that streams carry the runs'
// terminal events. Idempotent; returns ctx.Err() on deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.shutOnce.Do(func() { close(s.stopBeat) })
	aerr := s.a2a.Shutdown(ctx) // A2A streams are not hijacked: end them before http.Shutdown waits for them
	err := s.http.Shutdown(ctx) // stream connections are hijacked, so this does not wait for them
	cerr := s.streams.closeAll(ctx)
	s.writers.Close()
	if werr := s.writers.Wait(ctx); err == nil {
		err = werr
	}
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = aerr
	}
	return err
}

// authenticateA2A is the A2A handler's Authenticate hook: the same bearer
// tokens and tenants as the rest of the API.
func (s *Server) authenticateA2A(r *http.Request) (messages.TenantID, error) {
	tenant, aerr := s.authenticate(r)
	if aerr != nil {
		return "", aerr // only a non-nil *apiError: never a typed nil inside the error
	}
	return tenant, nil
}
