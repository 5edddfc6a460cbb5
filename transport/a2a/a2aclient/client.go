// Package a2aclient is Conclave's A2A v1.0 client (JSON-RPC binding over
// HTTP, SSE streams): it fetches and checks a remote agent's card, calls
// SendStreamingMessage, SubscribeToTask, GetTask and CancelTask, and
// follows a task for a council node (Agent, which implements
// remote.Agent).
//
// It is written on package a2a's wire types rather than on
// a2aproject/a2a-go: the only release of that library available to us
// (v0.3.3) speaks A2A 0.3 (message/stream, tasks/resubscribe), not 1.0
// (SendStreamingMessage, SubscribeToTask), which our server and the
// official @a2a-js/sdk 1.x speak.
//
// Every input is bounded: the card's size (Config.MaxCardBytes), a unary
// answer's (Config.MaxResponseBytes), one SSE frame's
// (Config.MaxFrameBytes), the wait for any byte of a stream, pings
// included (Config.IdleTimeout), and each unary call's duration
// (Config.CallTimeout). Headers of Config.Header (the Authorization the
// operator configured) are sent with every request and never logged.
package a2aclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/conclave-ai/conclave/transport/a2a"
)

// Defaults of Config.
const (
	DefaultCardTimeout      = 10 * time.Second
	DefaultCallTimeout      = 30 * time.Second
	DefaultIdleTimeout      = 60 * time.Second // our server pings every 15 s
	DefaultMaxCardBytes     = 64 << 10
	DefaultMaxResponseBytes = 4 << 20
	DefaultMaxFrameBytes    = 1 << 20
	DefaultMaxOutputBytes   = 4 << 20
	DefaultRetries          = 5
	DefaultBackoff          = 250 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
)

// Errors.
var (
	// ErrFrameTooLarge: an SSE frame (or line) exceeded MaxFrameBytes.
	ErrFrameTooLarge = errors.New("a2aclient: stream frame too large")
	// ErrIdle: a stream sent nothing, not even a ping, for IdleTimeout.
	ErrIdle = errors.New("a2aclient: stream idle")
	// ErrTooLarge: a card or an answer exceeded its size bound.
	ErrTooLarge = errors.New("a2aclient: response too large")
	// ErrBadCard: the agent card is not one this client can use.
	ErrBadCard = errors.New("a2aclient: unusable agent card")
	// ErrProtocol: the remote answered something that is not A2A.
	ErrProtocol = errors.New("a2aclient: protocol error")
)

// Config tunes a Client. Its zero value is valid: every zero field takes
// its default.
type Config struct {
	// HTTP sends the requests. Default: a client with no overall timeout
	// (streams are long; CallTimeout and IdleTimeout bound the calls).
	HTTP *http.Client
	// Header is sent with every request (an Authorization). Never logged.
	Header http.Header
	// CardTimeout bounds fetching the card; CallTimeout a unary call.
	CardTimeout time.Duration
	CallTimeout time.Duration
	// IdleTimeout: a stream that sends nothing for this long is dropped.
	IdleTimeout time.Duration
	// MaxCardBytes, MaxResponseBytes and MaxFrameBytes bound the card, a
	// unary answer and one SSE frame; MaxOutputBytes the text Agent
	// keeps of a task.
	MaxCardBytes     int64
	MaxResponseBytes int64
	MaxFrameBytes    int
	MaxOutputBytes   int
	// Retries is how many times Agent re-subscribes to a task whose stream
	// dropped before the task ended, waiting Backoff, doubled each time
	// up to MaxBackoff, before each. Negative: never.
	Retries    int
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Sleep waits d or until ctx ends (the backoff's clock). Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// NewID makes message ids. Default: a per-client counter with a
	// random-free, time-based prefix.
	NewID func() string
}

func (c Config) withDefaults() Config {
	if c.HTTP == nil {
		c.HTTP = &http.Client{}
	}
	if c.CardTimeout <= 0 {
		c.CardTimeout = DefaultCardTimeout
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxCardBytes <= 0 {
		c.MaxCardBytes = DefaultMaxCardBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.NewID == nil {
		var n atomic.Uint64
		prefix := "conclave-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		c.NewID = func() string { return prefix + strconv.FormatUint(n.Add(1), 10) }
	}
	return c
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Client calls one remote agent's JSON-RPC endpoint. It is safe for
// concurrent use.
type Client struct {
	cfg    Config
	rpcURL string
	card   a2a.AgentCard
	nextID atomic.Int64 // JSON-RPC request ids
}

// New returns a client of the JSON-RPC endpoint rpcURL (no card).
func New(rpcURL string, cfg Config) *Client {
	return &Client{cfg: cfg.withDefaults(), rpcURL: rpcURL}
}

// Dial fetches the agent card at cardURL, checks it (a JSONRPC interface
// of protocol version 1.x, streaming), and returns a client of that
// interface. A relative interface URL is resolved against cardURL.
func Dial(ctx context.Context, cardURL string, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	card, err := fetchCard(ctx, cardURL, cfg)
	if err != nil {
		return nil, err
	}
	rpc, err := pickInterface(cardURL, card)
	if err != nil {
		return nil, err
	}
	if len(cfg.Header) > 0 && origin(rpc) != origin(cardURL) {
		// The credentials were given for the card's server: a card must
		// not be able to send them elsewhere.
		return nil, fmt.Errorf("%w: its interface %s is on another origin than the card (%s); refusing to send the credentials there",
			ErrBadCard, redactURL(rpc), origin(cardURL))
	}
	return &Client{cfg: cfg, rpcURL: rpc, card: *card}, nil
}

// Card returns the agent card Dial fetched (zero for New).
func (c *Client) Card() a2a.AgentCard { return c.card }

// URL returns the JSON-RPC endpoint.
func (c *Client) URL() string { return c.rpcURL }

func fetchCard(ctx context.Context, cardURL string, cfg Config) (*a2a.AgentCard, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.CardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, fmt.Errorf("a2aclient: agent card URL: %w", err)
	}
	setHeaders(req, cfg.Header)
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2aclient: fetch the agent card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: HTTP %d", ErrBadCard, redactURL(cardURL), resp.StatusCode)
	}
	b, err := readBounded(resp.Body, cfg.MaxCardBytes)
	if err != nil {
		return nil, fmt.Errorf("a2aclient: the agent card: %w", err)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(b, &card); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrBadCard, err)
	}
	if card.Name == "" {
		return nil, fmt.Errorf("%w: it has no name", ErrBadCard)
	}
	if !card.Capabilities.Streaming {
		return nil, fmt.Errorf("%w: %q does not stream (capabilities.streaming is false)", ErrBadCard, card.Name)
	}
	return &card, nil
}

// pickInterface is the card's first JSONRPC interface of A2A 1.x.
func pickInterface(cardURL string, card *a2a.AgentCard) (string, error) {
	var seen []string
	for _, in := range card.SupportedInterfaces {
		seen = append(seen, in.ProtocolBinding+" "+in.ProtocolVersion)
		if !strings.EqualFold(in.ProtocolBinding, "JSONRPC") || !(in.ProtocolVersion == "1" || strings.HasPrefix(in.ProtocolVersion, "1.")) {
			continue
		}
		base, err := url.Parse(cardURL)
		if err != nil {
			return "", fmt.Errorf("a2aclient: agent card URL: %w", err)
		}
		u, err := base.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Errorf("%w: interface URL %q", ErrBadCard, in.URL)
		}
		return u.String(), nil
	}
	return "", fmt.Errorf("%w: %q has no JSONRPC interface of A2A 1.x (it has %v)", ErrBadCard, card.Name, seen)
}

// origin is a URL's scheme://host[:port].
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// redactURL drops a URL's user info and query (where tokens hide).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

func setHeaders(req *http.Request, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
}

// readBounded reads r whole, failing with ErrTooLarge past max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	}
	return b, nil
}

// rpcRequest and rpcResponse are the JSON-RPC envelopes as a client sees
// them.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *a2a.RPCError   `json:"error"`
}

// decode checks a JSON-RPC response and decodes its result into out.
func (r *rpcResponse) decode(out any) error {
	if r.Error != nil {
		return r.Error
	}
	if r.JSONRPC != "2.0" || len(r.Result) == 0 {
		return fmt.Errorf("%w: not a JSON-RPC 2.0 result", ErrProtocol)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("%w: result: %v", ErrProtocol, err)
	}
	return nil
}

// post sends a JSON-RPC request; the caller closes the response body.
func (c *Client) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: c.nextID.Add(1), Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("a2aclient: %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.rpcURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("a2aclient: %s: %w", method, err)
	}
	setHeaders(req, c.cfg.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("A2A-Version", a2a.ProtocolVersion)
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2aclient: %s: %w", method, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		return nil, fmt.Errorf("a2aclient: %s: HTTP %d: the remote refused our credentials", method, resp.StatusCode)
	}
	return resp, nil
}

// call makes a unary call and decodes its result into out.
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.readRPC(method, resp, out)
}

// readRPC decodes a JSON-RPC answer (any HTTP status: errors come as 4xx
// and 5xx too).
func (c *Client) readRPC(method string, resp *http.Response, out any) error {
	b, err := readBounded(resp.Body, c.cfg.MaxResponseBytes)
	if err != nil {
		return fmt.Errorf("a2aclient: %s: %w", method, err)
	}
	var r rpcResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%w: %s: HTTP %d, not JSON-RPC: %.200s", ErrProtocol, method, resp.StatusCode, b)
	}
	if err := r.decode(out); err != nil {
		return fmt.Errorf("a2aclient: %s: %w", method, err)
	}
	return nil
}

// GetTask returns task id.
func (c *Client) GetTask(ctx context.Context, id string) (*a2a.Task, error) {
	var t a2a.Task
	if err := c.call(ctx, "GetTask", a2a.GetTaskRequest{ID: id}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// CancelTask cancels task id and returns it.
func (c *Client) CancelTask(ctx context.Context, id string) (*a2a.Task, error) {
	var t a2a.Task
	if err := c.call(ctx, "CancelTask", a2a.CancelTaskRequest{ID: id}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// SendStreamingMessage sends req and returns the task's stream. An error
// the remote answers before the stream begins is an *a2a.RPCError.
func (c *Client) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) (*Stream, error) {
	return c.stream(ctx, "SendStreamingMessage", req)
}

// SubscribeToTask returns the stream of task id (a snapshot first).
func (c *Client) SubscribeToTask(ctx context.Context, id string) (*Stream, error) {
	return c.stream(ctx, "SubscribeToTask", a2a.SubscribeToTaskRequest{ID: id})
}

func (c *Client) stream(ctx context.Context, method string, params any) (*Stream, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	// The idle timer runs from the request on: a remote that never
	// answers is as idle as one that stops talking.
	s := &Stream{cancel: cancel, idle: c.cfg.IdleTimeout, max: c.cfg.MaxFrameBytes}
	s.timer = time.AfterFunc(s.idle, func() { cancel(ErrIdle) })
	resp, err := c.post(ctx, method, params, "text/event-stream")
	if err != nil {
		s.timer.Stop()
		cancel(nil)
		if cause := context.Cause(ctx); errors.Is(cause, ErrIdle) {
			return nil, fmt.Errorf("a2aclient: %s: %w", method, ErrIdle)
		}
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		// An error before the stream begins is a plain JSON-RPC answer.
		defer resp.Body.Close()
		defer cancel(nil)
		s.timer.Stop()
		var ignored json.RawMessage
		if err := c.readRPC(method, resp, &ignored); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s answered %q, not a stream", ErrProtocol, method, ct)
	}
	s.body, s.ctx = resp.Body, ctx
	s.r = newLineReader(resp.Body, c.cfg.MaxFrameBytes)
	return s, nil
}
