package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// Paths the handlers are meant to be mounted at. The agent card advertises
// RPCPath on the host the card was fetched from.
const (
	CardPath = "/.well-known/agent-card.json"
	RPCPath  = "/a2a"
)

// Config configures a Handler. Only Engine is required; the zero value of
// every other field is valid.
type Config struct {
	Engine *actors.Engine
	// Logger receives the handler's logs. Default: discard.
	Logger *slog.Logger
	// Authenticate finds the caller's tenant (the server's bearer tokens).
	// An error answers HTTP 401. Nil: every caller is messages.LocalTenant.
	Authenticate func(*http.Request) (messages.TenantID, error)
	// BearerAuth advertises HTTP bearer authentication in the agent card.
	BearerAuth bool
	// Heartbeat is the interval of SSE comment heartbeats on idle streams.
	// Default 10 s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a stream; a client that accepts
	// nothing for this long is dropped. Default 30 s.
	WriteTimeout time.Duration
	// MaxBody bounds request bodies. Default 1 MiB.
	MaxBody int64
	// Version is the agent card's version. Default "1.0.0".
	Version string
	// StreamSlot, when set, is called before a call that holds its
	// connection for long (SendStreamingMessage, SubscribeToTask, a
	// blocking SendMessage); release is called when the call ends. An
	// error refuses the call: an *httpjson.Error gives the HTTP status and
	// Retry-After (the server's stream caps answer 429).
	StreamSlot func(messages.TenantID) (release func(), err error)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.MaxBody == 0 {
		c.MaxBody = 1 << 20
	}
	if c.Version == "" {
		c.Version = "1.0.0"
	}
	return c
}

// Handler serves A2A v1.0 over JSON-RPC: the agent card and the RPC
// endpoint. It holds no goroutine of its own; each request runs on its
// net/http goroutine, and Shutdown ends the streams among them.
type Handler struct {
	cfg    Config
	engine *actors.Engine

	stopCtx context.Context // cancelled by Shutdown; every request watches it
	stop    context.CancelFunc

	mu       sync.Mutex // guards closed, inflight and idle
	closed   bool
	inflight int
	idle     chan struct{} // made by Shutdown, closed when inflight reaches 0
}

// New builds a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Engine == nil {
		return nil, errors.New("a2a: Config.Engine is required")
	}
	cfg = cfg.withDefaults()
	if cfg.Heartbeat < 0 || cfg.WriteTimeout < 0 || cfg.MaxBody < 0 {
		return nil, errors.New("a2a: Heartbeat, WriteTimeout and MaxBody must not be negative")
	}
	h := &Handler{cfg: cfg, engine: cfg.Engine}
	h.stopCtx, h.stop = context.WithCancel(context.Background())
	return h, nil
}

// Card serves the agent card (GET CardPath).
func (h *Handler) Card() http.Handler { return http.HandlerFunc(h.serveCard) }

// RPC serves the JSON-RPC endpoint (POST RPCPath).
func (h *Handler) RPC() http.Handler { return http.HandlerFunc(h.serveRPC) }

// Shutdown refuses new requests and ends the running ones: streams get a
// final JSON-RPC error frame, blocking calls an error answer. It waits for
// them to return, or for ctx. It is idempotent.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.idle = make(chan struct{})
		if h.inflight == 0 {
			close(h.idle)
		}
	}
	idle := h.idle
	h.mu.Unlock()
	h.stop()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enter registers a request; false once shut down.
func (h *Handler) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.inflight++
	return true
}

func (h *Handler) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight--
	if h.closed && h.inflight == 0 {
		close(h.idle)
	}
}

var errShutdown = errors.New("a2a: server shutting down")

func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET"})
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// Text and data parts are the question; file parts (raw bytes or a
	// url) of these types are the run's files.
	inputModes := []string{"text/plain", "application/json", "text/markdown", "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}
	card := AgentCard{
		Name:        "Conclave",
		Description: "A council of agents: a director plans the question as a graph of nodes, the nodes work in parallel waves (delegating to sub-agents and calling tools, with optional human approval), and a synthesiser composes the answer.",
		SupportedInterfaces: []AgentInterface{{
			URL: scheme + "://" + r.Host + RPCPath, ProtocolBinding: "JSONRPC", ProtocolVersion: ProtocolVersion,
		}},
		Version:            h.cfg.Version,
		Capabilities:       AgentCapabilities{Streaming: true},
		DefaultInputModes:  inputModes,
		DefaultOutputModes: []string{"text/plain"},
		Skills: []AgentSkill{{
			ID: "council", Name: "Council",
			Description: "Answers a question with a council run. Each node's output streams as an artifact (artifactId = its lane), " +
				"the answer as the artifact \"answer\". Run options go in the message metadata with the names of POST /api/v1/runs: " +
				"hitl (none|plan|node|tools), scenario, seed, concurrency, approval_timeout_seconds, approval_timeout_action. " +
				"Approvals and questions arrive as TASK_STATE_INPUT_REQUIRED; answer with a message carrying the same taskId.",
			Tags:        []string{"council", "multi-agent", "planning", "synthesis", "human-in-the-loop"},
			Examples:    []string{"Why is the sky blue?"},
			InputModes:  inputModes,
			OutputModes: []string{"text/plain"},
		}},
	}
	if h.cfg.BearerAuth {
		card.SecuritySchemes = map[string]SecurityScheme{"bearer": {HTTPAuth: &HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "Conclave API token (the server's --tokens)",
		}}}
		card.SecurityRequirements = []SecurityRequirement{{Schemes: map[string]StringList{"bearer": {List: []string{}}}}}
	}
	b, err := json.Marshal(card)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "encoding the agent card failed"})
		return
	}
	b = append(b, '\n')
	// Spec §8.6.1: clients may cache the card. It changes only with the
	// server's version, flags and the Host it is asked for; the ETag (of
	// the exact bytes) lets a client revalidate it for free.
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("Cache-Control", "max-age="+strconv.Itoa(int(CardMaxAge/time.Second)))
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Host")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// CardMaxAge is how long a client may use the agent card without asking
// again (Cache-Control max-age).
const CardMaxAge = 5 * time.Minute

// etagMatches reports whether an If-None-Match header names etag (or is
// "*"); weak validators compare equal to strong ones (RFC 9110 §13.1.2).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// UnauthorizedBody is the body of a 401 answer: the JSON-RPC error this
// handler answers when Authenticate fails with err.
func UnauthorizedBody(err error) []byte {
	b, _ := json.Marshal(rpcResponse{JSONRPC: "2.0", Error: rpcErrorf(CodeInvalidRequest, "unauthorized: %v", err)})
	return append(b, '\n')
}

// writeRPCError answers with a JSON-RPC error. Like the reference server,
// protocol errors are HTTP 200 and internal errors 500, except the
// errors that carry their own status (a quota's 429, an unavailable
// server's 503), with Retry-After when they say when to retry.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *RPCError) {
	status := http.StatusOK
	switch {
	case e.status != 0:
		status = e.status
	case e.Code == CodeInternal:
		status = http.StatusInternalServerError
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.retryAfter+time.Second-1)/time.Second), 10))
	}
	writeJSON(w, status, rpcResponse{JSONRPC: "2.0", ID: id, Error: e})
}

// serveRPC: POST RPCPath. Checks, in order: method, authentication,
// Content-Type, body size, JSON, JSON-RPC shape, A2A-Version; then the
// method dispatches.
func (h *Handler) serveRPC(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, rpcResponse{JSONRPC: "2.0", Error: rpcErrorf(CodeInvalidRequest, "use POST")})
		return
	}
	tenant := messages.LocalTenant
	if h.cfg.Authenticate != nil {
		t, err := h.cfg.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="conclave"`)
			// Answered at once, body unread, connection closed: an
			// unauthenticated request costs no more than its headers.
			httpjson.WriteAndClose(w, http.StatusUnauthorized, "application/json", UnauthorizedBody(err), nil)
			return
		}
		tenant = t
	}
	if !h.enter() {
		writeJSON(w, http.StatusServiceUnavailable, rpcResponse{JSONRPC: "2.0", Error: rpcErrorf(CodeInternal, "server shutting down")})
		return
	}
	defer h.leave()
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			writeRPCError(w, nil, rpcErrorf(CodeContentTypeNotSupported, "Content-Type %q is not supported; use application/json", ct))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPCError(w, nil, rpcErrorf(CodeInvalidRequest, "request body is larger than %d bytes", h.cfg.MaxBody))
			return
		}
		writeRPCError(w, nil, rpcErrorf(CodeParseError, "reading the request body failed: %v", err))
		return
	}
	req, rerr := parseRequest(body)
	if rerr != nil {
		writeRPCError(w, req.ID, rerr)
		return
	}
	if rerr := checkVersion(r.Header.Get("A2A-Version")); rerr != nil {
		writeRPCError(w, req.ID, rerr)
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stopWatch := context.AfterFunc(h.stopCtx, func() { cancel(errShutdown) })
	defer stopWatch()
	if h.cfg.StreamSlot != nil && (req.Method == "SendMessage" || req.Method == "SendStreamingMessage" || req.Method == "SubscribeToTask") {
		release, err := h.cfg.StreamSlot(tenant)
		if err != nil {
			writeRPCError(w, req.ID, streamSlotError(err))
			return
		}
		defer release()
	}
	c := &call{h: h, w: w, ctx: ctx, tenant: tenant, id: req.ID, traceParent: r.Header.Get("Traceparent")}
	var result any
	switch req.Method {
	case "SendMessage":
		result, rerr = c.sendMessage(req.Params)
	case "SendStreamingMessage":
		rerr = c.sendStreamingMessage(req.Params)
	case "GetTask":
		result, rerr = c.getTask(req.Params)
	case "ListTasks":
		result, rerr = c.listTasks(req.Params)
	case "CancelTask":
		result, rerr = c.cancelTask(req.Params)
	case "SubscribeToTask":
		rerr = c.subscribeToTask(req.Params)
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
		"ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		rerr = rpcErrorf(CodePushNotificationNotSupported, "push notifications are not supported; use SendStreamingMessage or SubscribeToTask")
	case "GetExtendedAgentCard":
		rerr = rpcErrorf(CodeExtendedCardNotConfigured, "there is no extended agent card")
	default:
		rerr = rpcErrorf(CodeMethodNotFound, "method %q not found", clip(req.Method, 64))
	}
	if rerr != nil && rerr.Code == CodeInternal && !errors.Is(context.Cause(ctx), errShutdown) && r.Context().Err() == nil {
		h.cfg.Logger.Warn("a2a: internal error", "method", req.Method, "tenant", tenant, "err", rerr.Message)
	}
	switch {
	case c.streaming:
		// The stream wrote its own frames, and its error if it had one.
	case c.misdirected != nil:
		httpjson.WriteError(w, httpjson.EngineError(c.misdirected)) // 421, Conclave-Owner
	case rerr != nil:
		if errors.Is(context.Cause(ctx), errShutdown) && rerr.Code == CodeInternal {
			writeJSON(w, http.StatusServiceUnavailable, rpcResponse{JSONRPC: "2.0", ID: req.ID, Error: rerr})
			return
		}
		writeRPCError(w, req.ID, rerr)
	default:
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: result})
	}
}

// parseRequest decodes and checks a JSON-RPC request. The returned request
// carries the id whenever a valid one could be read, for the error answer.
func parseRequest(body []byte) (rpcRequest, *RPCError) {
	if !utf8.Valid(body) { // json.Valid does not check it, and decoding would silently replace the bytes
		return rpcRequest{}, rpcErrorf(CodeParseError, "the body is not valid UTF-8")
	}
	if !json.Valid(body) {
		return rpcRequest{}, rpcErrorf(CodeParseError, "the body is not valid JSON")
	}
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return rpcRequest{}, rpcErrorf(CodeInvalidRequest, "the body must be one JSON-RPC request object (batches are not supported)")
	}
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &probe)
	id := probe.ID
	if !validID(id) {
		return rpcRequest{}, rpcErrorf(CodeInvalidRequest, `"id" must be a string, a number or null`)
	}
	var req rpcRequest
	err := json.Unmarshal(body, &req)
	req.ID = id
	switch {
	case err != nil:
		return req, rpcErrorf(CodeInvalidRequest, "not a JSON-RPC request: %s", strings.TrimPrefix(err.Error(), "json: "))
	case req.JSONRPC != "2.0":
		return req, rpcErrorf(CodeInvalidRequest, `"jsonrpc" must be "2.0"`)
	case req.Method == "":
		return req, rpcErrorf(CodeInvalidRequest, `"method" is required`)
	}
	return req, nil
}

// checkVersion accepts A2A-Version 1.0 (1.0.x too). An absent header means
// 0.3 (spec §3.6.2), which this server does not speak.
func checkVersion(v string) *RPCError {
	v = strings.TrimSpace(v)
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	if major == "1" && minor == "0" {
		return nil
	}
	if v == "" {
		v = "0.3 (no A2A-Version header)"
	}
	return rpcErrorf(CodeVersionNotSupported, "A2A version %s is not supported; send A2A-Version: %s", clip(v, 32), ProtocolVersion)
}

// decodeParams decodes a method's params, which must be a JSON object.
func (c *call) decodeParams(params json.RawMessage, dst any) *RPCError {
	if b := bytes.TrimSpace(params); len(b) == 0 || b[0] != '{' {
		return rpcErrorf(CodeInvalidParams, "params must be a JSON object")
	}
	err := messages.DecodeStrict(params, dst)
	var unknown *messages.UnknownFieldError
	if errors.As(err, &unknown) {
		// Spec §5.7: unrecognized fields SHOULD be ignored (a newer
		// client's). Said at debug level, for whoever wonders why a field
		// has no effect.
		c.h.cfg.Logger.Debug("a2a: unknown field ignored", "field", unknown.Path)
		err = messages.DecodeOpen(params, dst)
	}
	if err != nil {
		return invalidParams("params", err)
	}
	return nil
}

// engineError maps an engine error met while working on a task: each
// error the engine names has its A2A error and HTTP status (the same
// status REST and AG-UI answer for it).
func engineError(err error) *RPCError {
	var quota *actors.QuotaError
	var file *messages.FileError
	switch {
	case errors.As(err, &quota) && quota.Permanent():
		// It can never fit: the request is at fault, as REST's 422 says.
		e := rpcErrorf(CodeInvalidParams, "%s: %s", quota.Code, quota.Message)
		e.status = http.StatusUnprocessableEntity
		return e
	case errors.As(err, &quota) && quota.Code == actors.QuotaTenantSuspended:
		// Retrying does not help until the billing service lifts the
		// suspension: 402, as REST and AG-UI answer, without Retry-After.
		e := quotaError(string(quota.Code), quota.Message, 0)
		e.Data[0].Metadata = nil
		e.status, e.retryAfter = http.StatusPaymentRequired, 0
		return e
	case errors.As(err, &quota):
		return quotaError(string(quota.Code), quota.Message, quota.RetryAfter)
	case errors.Is(err, actors.ErrRunNotFound), errors.Is(err, actors.ErrSessionNotFound):
		return rpcErrorf(CodeTaskNotFound, "task not found")
	case errors.As(err, &file):
		// A file the run does not take: its code, and REST's status.
		e := rpcErrorf(CodeInvalidParams, "%s: %s", file.Code, file.Error())
		e.status = http.StatusUnprocessableEntity
		if file.TooLarge() {
			e.status = http.StatusRequestEntityTooLarge
		}
		return e
	case errors.Is(err, actors.ErrInvalidRequest):
		return rpcErrorf(CodeInvalidParams, "%s", strings.TrimPrefix(err.Error(), "actors: invalid request: "))
	case errors.Is(err, actors.ErrUnavailable):
		e := rpcErrorf(CodeInternal, "temporarily unavailable, retry: %s", strings.TrimPrefix(err.Error(), "actors: "))
		e.status, e.retryAfter = http.StatusServiceUnavailable, time.Second
		return e
	case errors.Is(err, actors.ErrShuttingDown), errors.Is(err, errShutdown):
		e := rpcErrorf(CodeInternal, "server shutting down")
		e.status = http.StatusServiceUnavailable
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return rpcErrorf(CodeInternal, "request ended: %v", err)
	}
	return rpcErrorf(CodeInternal, "%v", err)
}

// ctxError is the error of a call whose context ended.
func ctxError(ctx context.Context) *RPCError {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return rpcErrorf(CodeInternal, "server shutting down")
	}
	return rpcErrorf(CodeInternal, "request ended: %v", ctx.Err())
}
