// Package transport is Conclave's HTTP face: the runs API, the SSE and
// WebSocket event streams with resume, bearer-token tenants, and metrics.
// See docs/api.md for the wire contract.
//
// Streams are built for fan-out. After a stream request is validated the
// connection is taken over from net/http, and it holds no goroutine while
// it has nothing to send: the session hub wakes it when events arrive, a
// writer goroutine then sends everything pending in one write, and exits
// once the connection has been idle for a while (stream.go). Where the
// connection cannot be taken over (HTTP/2, HTTP/3, a ResponseWriter
// wrapped by middleware that hides Hijack), an SSE stream is written and
// flushed through the ResponseWriter by its handler's goroutine, with the
// same semantics (ssesink.go); WebSocket streams need HTTP/1.1.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/agui"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// Config configures a Server. Only Engine is required.
type Config struct {
	Engine *actors.Engine
	// Ready lists what keeps the server from taking work (conclave serve:
	// a failed journal); GET /readyz answers 503 naming them, and 200
	// when the list is empty. Nil: ready until Shutdown.
	Ready func() []messages.NotReady
	// Audit, when set, serves GET /api/v1/audit: the caller's tenant's
	// audit log (package audit). Without it the endpoint answers 404.
	Audit AuditReader
	// ToolServers, when set, reports the MCP tool servers' state for GET
	// /api/v1/tools (mcp.Servers.Status, converted); nil: none.
	ToolServers func() []messages.ToolServer
	// Tokens maps bearer tokens to tenants. Empty: no authentication, and
	// Listen refuses any address that is not loopback.
	Tokens Tokens
	Logger *slog.Logger
	Now    func() time.Time
	// NewID makes ids the server hands out (a run request's X-Request-Id
	// when the client sent none). Default uuid.New.
	NewID func() uuid.UUID
	// Heartbeat is the interval of SSE comment heartbeats and WebSocket
	// pings on idle streams. Default 10 s.
	Heartbeat time.Duration
	// FlushDelay lets a woken stream wait this long before it writes, so
	// events arriving meanwhile share one write. Default 0 (write at once);
	// a few milliseconds trade latency for far fewer syscalls under load.
	FlushDelay time.Duration
	// MaxLagEvents ends a stream whose client has not received this many
	// of its session's events (not yet written, or written and still in
	// the server's socket send buffer). Default 0: never; a slow client
	// reads what it missed from the journal and is never cut for being
	// slow. The stream ends with the close reason "lagging" (docs/api.md).
	MaxLagEvents uint64
	// MaxLagBytes is MaxLagEvents in bytes written and not acknowledged by
	// the client. Default 0: never.
	MaxLagBytes uint64
	// SSERetry is the reconnection delay an SSE stream advises its client
	// with "retry:" when it starts. Default 1 s.
	SSERetry time.Duration
	// ReadHeaderTimeout bounds reading a request's headers; a connection
	// that has not sent complete headers by then is closed. Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte: a body trickled more slowly is cut. Streams and
	// long answers are exempt once their request is in. Default 30 s.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request. Default 60 s.
	IdleTimeout time.Duration
	// MaxConnections caps the open client connections (requests,
	// keep-alive and streams). At the cap a new connection evicts the
	// oldest one that is idle or still sending its headers, or is refused
	// with a fast 503 if there is none (conns.go). Default 0: derived from
	// RLIMIT_NOFILE, leaving a quarter of it (at least 64) to the journal
	// and the rest of the process. Negative: no cap.
	MaxConnections int
	// MaxStreams caps the open event streams (SSE, WebSocket, AG-UI,
	// A2A) in total; over it a stream request gets 429 too_many_streams.
	// Default 0: three quarters of MaxConnections, so that streams never
	// take the slots that requests and health checks need. Negative: no cap.
	MaxStreams int
	// MaxStreamsPerTenant caps one tenant's open streams. Default 0: no cap
	// below MaxStreams.
	MaxStreamsPerTenant int
	// StreamLimit, when set, gives a tenant's stream cap instead of
	// MaxStreamsPerTenant; 0 means MaxStreamsPerTenant, negative no cap.
	StreamLimit func(messages.TenantID) int
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
	Registry prometheus.Registerer
	// Gatherer is what /metrics serves. Default: Registry, when it is also
	// a Gatherer (a *prometheus.Registry is); otherwise /metrics answers
	// 404 and the embedder serves its metrics itself.
	Gatherer prometheus.Gatherer
	// Dashboard, when set, serves the paths no endpoint claims outside
	// /api/ ("/" included): conclave serve sets it to the web dashboard
	// (web.Handler). Paths under /api/ that name no endpoint are always the
	// API's JSON 404. Nil: every unclaimed path is that 404.
	Dashboard http.Handler
	// Wrap, when set, wraps the server's handler (everything but CORS,
	// which stays outermost): cluster mode forwards the calls another node
	// must serve (cluster.Forwarder.Handler).
	Wrap func(http.Handler) http.Handler
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = uuid.New
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.SSERetry == 0 {
		c.SSERetry = time.Second
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections()
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = max(1, c.MaxConnections*3/4) // a negative MaxConnections gives -1: no cap
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
	if c.Gatherer == nil {
		c.Gatherer, _ = c.Registry.(prometheus.Gatherer)
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
	mux     *routeTable // everything the server serves
	http    *http.Server
	metrics *metrics
	// refusals logs the requests refused for the client's fault (WARN).
	refusals *refusalLog
	idem     *idempotency
	streams  *streamSet
	conns    *connTracker
	caps     *streamCaps
	a2a      *a2a.Handler  // A2A agent card and JSON-RPC (transport/a2a)
	agui     *agui.Handler // AG-UI runs (transport/agui)
	writers  routine.Group // stream writer goroutines and the heartbeat loop

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
		cfg: cfg, engine: cfg.Engine, mux: newRouteTable(),
		idem:     newIdempotency(cfg.IdempotencyTTL, cfg.Now),
		streams:  newStreamSet(),
		stopBeat: make(chan struct{}),
		refusals: &refusalLog{logger: cfg.Logger, now: cfg.Now},
	}
	m, err := newMetrics(cfg.Registry, cfg.Gatherer, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.conns = newConnTracker(cfg.MaxConnections, m)
	perTenant := func(t messages.TenantID) int {
		if cfg.StreamLimit != nil {
			if n := cfg.StreamLimit(t); n != 0 {
				return n
			}
		}
		return cfg.MaxStreamsPerTenant
	}
	s.caps = newStreamCaps(cfg.MaxStreams, perTenant, m)
	if s.a2a, err = a2a.New(a2a.Config{
		Engine: cfg.Engine, Logger: cfg.Logger, Heartbeat: cfg.Heartbeat,
		MaxBody: cfg.MaxBody, BearerAuth: cfg.Tokens.Len() > 0, Authenticate: s.authenticateA2A,
		StreamSlot: s.a2aStreamSlot,
	}); err != nil {
		return nil, err
	}
	s.agui = agui.New(agui.Config{Engine: cfg.Engine, Logger: cfg.Logger, Now: cfg.Now})
	s.routes()
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnState:         s.conns.connState,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.writers.Go(s.heartbeatLoop)
	return s, nil
}

// Handler returns the HTTP handler (for tests and embedding). The
// connection limits (MaxConnections, TCP keepalive) apply only to
// connections served by Serve. Served by another http.Server, over HTTP/2
// for instance, an SSE stream holds its request until it ends, and
// Shutdown ends it: call Shutdown before that server's own Shutdown (or
// from its RegisterOnShutdown hook), which waits for such requests.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.mux.mux
	if s.cfg.Wrap != nil {
		h = s.cfg.Wrap(h)
	}
	return s.cors(s.refusals.wrap(readDeadlineDone(h)))
}

// Inner is the server's handler without Config.Wrap and CORS: what a
// cluster node serves the calls forwarded to it with.
func (s *Server) Inner() http.Handler { return s.mux.mux }

func (s *Server) routes() {
	s.apiRoutes(s.mux, s.authed)
	// The two endpoints browsers open with EventSource and WebSocket, which
	// cannot send headers: the only ones that take ?access_token=.
	s.mux.handle("/api/v1/events/stream", get, s.sseEndpoint(s.authedStream))
	s.mux.handle("/api/v1/events/ws", get, s.wsEndpoint(s.authedStream))
	s.mux.handle("/api/v1/agui", post, s.aguiEndpoint(s.authed))
	s.mux.handle(openAPIPath, get, s.methods(map[string]http.HandlerFunc{http.MethodGet: serveOpenAPI}))
	s.mux.handle(a2a.CardPath, []string{http.MethodGet, http.MethodHead}, s.a2a.Card())
	s.mux.handle(a2a.RPCPath, post, s.preAuthA2A(s.tokenAuth(false), s.a2a.RPC()))
	s.mux.handle("/healthz", get, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.healthz}))
	s.mux.handle("/readyz", get, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.readyz}))
	metricsH := s.metrics.handler()
	s.mux.handle("/metrics", get, s.methods(map[string]http.HandlerFunc{http.MethodGet: s.authed(
		func(w http.ResponseWriter, r *http.Request, _ messages.TenantID) { metricsH.ServeHTTP(w, r) })}))
	// Not an endpoint: the dashboard (any method it answers) and the API's 404.
	s.mux.handle("/", nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Dashboard == nil || r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/") {
			notFound(w, r)
			return
		}
		s.cfg.Dashboard.ServeHTTP(w, r)
	}))
}

// Methods of routeTable.handle.
var (
	get  = []string{http.MethodGet}
	post = []string{http.MethodPost}
)

// NotFound answers every request with the API's JSON 404 (docs/api.md),
// for a Config.Dashboard to answer the paths it does not have.
func NotFound() http.Handler { return http.HandlerFunc(notFound) }

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, errorf(http.StatusNotFound, codeNotFound, "no such endpoint: "+r.URL.Path))
}

// withTenant wraps a handler that needs the caller's tenant: s.authed,
// s.authedStream, or an embedder's Authenticate (handlers.go).
type withTenant func(authedHandler) http.HandlerFunc

// apiRoutes registers the runs and interrupts API on mux.
func (s *Server) apiRoutes(mux *routeTable, authed withTenant) {
	route := func(pattern string, byMethod map[string]authedHandler) {
		hs := map[string]http.HandlerFunc{}
		for m, h := range byMethod {
			hs[m] = authed(h)
		}
		mux.handle(pattern, slices.Collect(maps.Keys(hs)), s.methods(hs))
	}
	route("/api/v1/runs", map[string]authedHandler{http.MethodPost: s.createRun, http.MethodGet: s.listRuns})
	route("/api/v1/runs/{id}", map[string]authedHandler{http.MethodGet: s.getRun})
	route("/api/v1/runs/{id}/abort", map[string]authedHandler{http.MethodPost: s.abortRun})
	route("/api/v1/runs/{id}/steer", map[string]authedHandler{http.MethodPost: s.steerRun})
	route("/api/v1/runs/{id}/rewind", map[string]authedHandler{http.MethodPost: s.rewindRun})
	route("/api/v1/events/resume/{id}", map[string]authedHandler{http.MethodPost: s.resume})
	route("/api/v1/interrupts", map[string]authedHandler{http.MethodGet: s.listInterrupts})
	route("/api/v1/interrupts/{id}", map[string]authedHandler{http.MethodGet: s.getInterrupt})
	route("/api/v1/interrupts/{id}/resume", map[string]authedHandler{http.MethodPost: s.resume})
	route("/api/v1/audit", map[string]authedHandler{http.MethodGet: s.listAudit})
	route("/api/v1/tools", map[string]authedHandler{http.MethodGet: s.listTools})
}

// sseEndpoint is GET /api/v1/events/stream.
func (s *Server) sseEndpoint(authed withTenant) http.HandlerFunc {
	return s.methods(map[string]http.HandlerFunc{http.MethodGet: authed(s.sseStream)})
}

// wsEndpoint is GET /api/v1/events/ws (HTTP/1.1 only: http1Only).
func (s *Server) wsEndpoint(authed withTenant) http.HandlerFunc {
	return http1Only(s.methods(map[string]http.HandlerFunc{http.MethodGet: authed(s.wsStream)})).ServeHTTP
}

// aguiEndpoint is POST /api/v1/agui.
func (s *Server) aguiEndpoint(authed withTenant) http.HandlerFunc {
	return s.methods(map[string]http.HandlerFunc{http.MethodPost: authed(
		func(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
			release, aerr := s.caps.acquire(tenant) // every AG-UI request is a stream
			if aerr != nil {
				writeError(w, aerr)
				return
			}
			defer release()
			s.agui.ServeTenant(w, r, tenant)
		})})
}

type tenantKey struct{}

// authedHandler receives the caller's tenant.
type authedHandler func(w http.ResponseWriter, r *http.Request, tenant messages.TenantID)

// authed authenticates with the Authorization header only.
func (s *Server) authed(h authedHandler) http.HandlerFunc { return s.auth(h, false) }

// authedStream also accepts ?access_token= (EventSource, WebSocket).
func (s *Server) authedStream(h authedHandler) http.HandlerFunc { return s.auth(h, true) }

func (s *Server) auth(h authedHandler, queryToken bool) http.HandlerFunc {
	return authWith(s.tokenAuth(queryToken), h)
}

// tenantOf finds the caller's tenant, or the error to answer.
type tenantOf func(*http.Request) (messages.TenantID, *apiError)

// tokenAuth authenticates with the server's bearer tokens.
func (s *Server) tokenAuth(queryToken bool) tenantOf {
	return func(r *http.Request) (messages.TenantID, *apiError) { return s.authenticate(r, queryToken) }
}

func authWith(authenticate tenantOf, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, err := authenticate(r)
		if err != nil {
			// An unauthenticated request costs no more than its headers:
			// answered at once, body unread, connection closed.
			httpjson.WriteErrorAndClose(w, err)
			return
		}
		h(w, r, tenant)
	}
}

// preAuthA2A refuses an unauthenticated A2A request like every other
// endpoint (answered at once, body unread, connection closed), in the
// JSON-RPC error shape the A2A handler itself would answer. The tenant
// found goes in the request's context, where authenticateA2A reads it.
func (s *Server) preAuthA2A(authenticate tenantOf, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			tenant, aerr := authenticate(r)
			if aerr != nil {
				httpjson.WriteAndClose(w, http.StatusUnauthorized, "application/json", a2a.UnauthorizedBody(aerr), aerr)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
		}
		next.ServeHTTP(w, r)
	})
}

// a2aStreamSlot is the A2A handler's StreamSlot hook: A2A streams (and
// blocking SendMessage calls) count against the same stream caps.
func (s *Server) a2aStreamSlot(tenant messages.TenantID) (func(), error) {
	release, aerr := s.caps.acquire(tenant)
	if aerr != nil {
		return nil, aerr
	}
	return release, nil
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

// sameOrigin reports whether origin is the origin r was sent to (its
// Host): the server's own pages, the dashboard, may open WebSockets without
// --allowed-origin. Without tokens only a loopback host counts: a name an
// attacker's page rebinds to 127.0.0.1 (DNS rebinding) is that page's own
// origin too, and must not read an unauthenticated server.
func (s *Server) sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	if s.cfg.Tokens.Len() > 0 {
		return true
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
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

// The request headers a page of an allowed origin may send (W3C trace
// context included: its run joins the page's trace), and the answer headers
// it may read beyond the CORS-safelisted ones.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, A2A-Version, A2A-Extensions, X-Request-Id, traceparent, tracestate"
	corsExposeHeaders = "Retry-After, X-Request-Id, Location, Idempotent-Replayed, ETag"
)

// cors answers preflights and adds CORS headers for allowed origins.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && s.originAllowed(origin) {
			h := w.Header()
			allowOrigin(h, origin)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// allowOrigin sets the CORS headers of an allowed origin's answer (once:
// an SSE stream sets them again on the hijacked path's own header).
func allowOrigin(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	if !slices.Contains(h.Values("Vary"), "Origin") {
		h.Add("Vary", "Origin")
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeJSON(w, http.StatusServiceUnavailable, messages.Health{Status: "shutting_down"})
		return
	}
	writeJSON(w, http.StatusOK, messages.Health{Status: "ok"})
}

// readyz is readiness (GET /readyz): 200 only while the server can take
// work; see messages.Readiness. Like /healthz it needs no token.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var not []messages.NotReady
	if s.closing.Load() {
		not = append(not, messages.NotReady{Component: "server", Reason: "shutting down"})
	}
	if s.cfg.Ready != nil {
		not = append(not, s.cfg.Ready()...)
	}
	if len(not) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, messages.Readiness{Status: messages.NotReadyStatus, NotReady: not})
		return
	}
	writeJSON(w, http.StatusOK, messages.Readiness{Status: messages.ReadyStatus})
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
// Every connection it accepts counts against MaxConnections and gets TCP
// keepalive (conns.go).
func (s *Server) Serve(l net.Listener) error {
	return s.http.Serve(&limitListener{Listener: l, t: s.conns})
}

// Shutdown stops the server: no new requests or streams, every open stream
// gets its final frame and is closed, and every goroutine of the server has
// returned. Shut the engine down first so that streams carry the runs'
// terminal events. Idempotent; returns ctx.Err() on deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.shutOnce.Do(func() { close(s.stopBeat) })
	// A2A and AG-UI streams are not hijacked: end them before http.Shutdown waits for them.
	aerr := s.a2a.Shutdown(ctx)
	if gerr := s.agui.Shutdown(ctx); aerr == nil {
		aerr = gerr
	}
	// SSE streams held by their handlers (HTTP/2, wrapped writers) would
	// keep http.Shutdown waiting: end every stream first. One that starts
	// afterwards is ended at once (streamSet.add), and new stream requests
	// are refused (closing).
	cerr := s.streams.closeAll(ctx)
	err := s.http.Shutdown(ctx) // hijacked connections are not waited for; held streams have ended
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
	if tenant, ok := r.Context().Value(tenantKey{}).(messages.TenantID); ok {
		return tenant, nil // authenticated by preAuthA2A
	}
	tenant, aerr := s.authenticate(r, false)
	if aerr != nil {
		return "", aerr // only a non-nil *apiError: never a typed nil inside the error
	}
	return tenant, nil
}
