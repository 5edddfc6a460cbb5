// Package openai is a model.Model on any OpenAI-compatible Chat Completions
// server (OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp's server, LiteLLM,
// OpenRouter, Groq, DeepSeek, Gemini's OpenAI endpoint, Mistral, NVIDIA NIM: each
// tested in its own streaming dialect, openaitest.Dialects),
// streaming, through github.com/openai/openai-go/v3: the SDK's types build
// the request, its client sends it (base URL, key, error answers as
// *openai.Error) and its SSE decoder splits the answer into events; each
// chunk is decoded here into the few fields used (wireChunk), about a third
// of the time and of the allocations of the SDK's decoder (BENCHMARKS.md).
//
// One model turn is one streamed chat completion. Text deltas become
// model.Text; the non-standard reasoning deltas servers send beside the
// content ("reasoning_content": vLLM, llama.cpp, DeepSeek; "reasoning":
// Ollama, OpenRouter, Groq) become model.Reasoning; tool-call deltas are
// accumulated per index (arguments split across chunks, calls interleaved;
// see addCall for the servers that differ) and become complete
// model.Calls when the choice finishes, with what the server sent beside
// the call to be sent back with it (Gemini's extra_content); the usage —
// a last chunk (stream_options.include_usage), inside the finish chunk, or
// in Groq's x_groq — becomes the turn's model.Usage, with the cached prompt
// tokens (prompt_tokens_details.cached_tokens, or DeepSeek's
// prompt_cache_hit_tokens). A server that sends no usage gets an estimate
// (EstimateTokens).
//
// The request is built per role: a system prompt (SystemPrompt), the task
// (question, goal, inputs, plan, note, transcript, review), the earlier
// turns as assistant messages with tool_calls and their tool messages, and
// the turn (guidance, injected updates, async tasks); the tools as function
// tools with their JSON Schemas. The director and the steerer ask for
// response_format json_schema (PlanSchema, DiffSchema) unless
// Config.NoResponseFormat; a server that answers 400 to it is asked again
// once without, and if that works it is never asked with it again.
//
// Errors before the first chunk — 429, 408 and 5xx answers, and connection
// failures — are retried with exponential backoff (honouring Retry-After
// and retry-after-ms), at most Config.MaxAttempts times; once a chunk has
// arrived nothing is retried here, and a failure is returned by Recv as an
// error wrapping model.ErrModel. Failures worth trying again later (a
// dropped connection, a stream that ends without a finish_reason, an error
// event from the server, retries used up, a Retry-After too long to wait)
// also wrap model.ErrTransient: the agent's supervisor restarts the agent
// after a backoff (actors: supervision.go). A malformed chunk does not.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Environment variables the API key is read from by KeyFromEnv, in order.
const (
	EnvAPIKey       = "CONCLAVE_MODEL_API_KEY"
	EnvOpenAIAPIKey = "OPENAI_API_KEY"
)

// KeyFromEnv returns the API key from CONCLAVE_MODEL_API_KEY, else from
// OPENAI_API_KEY, through getenv; "" when neither is set.
func KeyFromEnv(getenv func(string) string) string {
	if k := getenv(EnvAPIKey); k != "" {
		return k
	}
	return getenv(EnvOpenAIAPIKey)
}

// Defaults of Config.
const (
	DefaultMaxAttempts   = 4
	DefaultBaseBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = 2 * time.Minute
	// DefaultBreakerThreshold is more than one turn's attempts: one
	// failing turn alone does not open the breaker.
	DefaultBreakerThreshold = 2*DefaultMaxAttempts - 1
	// DefaultResponseHeaderTimeout bounds the wait for an answer's headers:
	// local servers may read a long prompt for minutes before answering.
	DefaultResponseHeaderTimeout = 5 * time.Minute
)

// Config configures a Model. Its zero value is not enough: BaseURL and
// Model are required.
type Config struct {
	// BaseURL is the server's API root, such as https://api.openai.com/v1
	// or http://localhost:11434/v1 (Ollama).
	BaseURL string
	// APIKey is sent as the bearer token; empty sends none (local servers).
	// It is never logged. See KeyFromEnv.
	APIKey string
	// Model is the model name of every role RoleModels does not name.
	Model string
	// RoleModels overrides Model per role (a cheap worker model, a strong
	// director and synthesizer).
	RoleModels map[model.Role]string
	// ContextTokens is the context budget of one request, in estimated
	// tokens (EstimateTokens); 0: no budget. Over it, the oldest inputs,
	// transcript lines and earlier turns are left out (see prompt.fit).
	ContextTokens int
	// Inputs says which attached files (images, PDFs) the server's models
	// take as content parts (default: none; text files always go in the
	// prompt's text). conclave serve --model-inputs.
	Inputs Inputs
	// NoResponseFormat turns off response_format json_schema for the
	// director and the steerer (for servers that mishandle it).
	NoResponseFormat bool
	// MaxAttempts bounds the attempts of one turn before its first chunk.
	// Default DefaultMaxAttempts; 1 disables retries.
	MaxAttempts int
	// BaseBackoff is the wait after the first failed attempt; it doubles
	// after each one, up to MaxBackoff. Defaults DefaultBaseBackoff and
	// DefaultMaxBackoff. A Retry-After from the server replaces it, up to
	// MaxRetryAfter (DefaultMaxRetryAfter): a server asking for longer is
	// not retried.
	BaseBackoff, MaxBackoff, MaxRetryAfter time.Duration
	// HTTPClient sends the requests. Default: a client of its own whose
	// transport waits at most DefaultResponseHeaderTimeout for an answer's
	// headers (a hung server); the turn's context bounds the rest (the
	// engine's model timeouts: model.WithTimeouts).
	HTTPClient *http.Client
	// Logger receives retries and fallbacks. Default: discard.
	Logger *slog.Logger
	// Now is the clock Retry-After dates are read against. Default time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx.Err()).
	// Default: a timer (virtual time under testing/synctest).
	Sleep func(ctx context.Context, d time.Duration) error
	// BreakerThreshold is how many failures of the endpoint in a row
	// (unreachable, 5xx, dropped connections; every agent's attempts
	// count) open its circuit breaker: new turns then fail at once with
	// code model_unavailable until a probe (GET /models) sees it answer.
	// Default DefaultBreakerThreshold; negative: no breaker.
	BreakerThreshold int
	// WaitWhenUnavailable makes a turn that meets the open breaker wait
	// for the probe to see the endpoint answer, then go on, instead of
	// failing at once with model_unavailable; it fails with it only when
	// its context ends first (the engine's turn timeout, an abort).
	// conclave serve --model-unavailable wait.
	WaitWhenUnavailable bool
}

// Model is a model.Model on an OpenAI-compatible server. It is safe for
// concurrent use by many agents.
type Model struct {
	cfg    Config
	client oa.Client
	log    *slog.Logger

	// noFormat is set once the server refused response_format (400) and
	// accepted the same request without it.
	noFormat atomic.Bool
	// brk is the endpoint's circuit breaker (breaker.go).
	brk *breaker
	// failures counts the turns that failed, by class (Stats).
	failMu   sync.Mutex
	failures map[model.Code]int64
}

// Stats are a Model's counters, for metrics.
type Stats struct {
	// Failures counts the turns that failed before their first chunk, by
	// class (model_unavailable included: refused by the open breaker).
	Failures map[model.Code]int64
	// Unavailable: the endpoint's circuit breaker is open.
	Unavailable bool
}

// Stats returns the Model's counters.
func (m *Model) Stats() Stats {
	m.failMu.Lock()
	defer m.failMu.Unlock()
	st := Stats{Failures: make(map[model.Code]int64, len(m.failures)), Unavailable: m.Unavailable() != ""}
	for c, n := range m.failures {
		st.Failures[c] = n
	}
	return st
}

// failed counts a turn's failure of class code and returns err.
func (m *Model) failed(err error) error {
	if c := model.CodeOf(err); c != "" {
		m.failMu.Lock()
		if m.failures == nil {
			m.failures = map[model.Code]int64{}
		}
		m.failures[c]++
		m.failMu.Unlock()
	}
	return err
}

var (
	_ model.Model  = (*Model)(nil)
	_ model.Stream = (*stream)(nil)
)

// Errors of New.
var (
	ErrNoBaseURL = errors.New("openai: no base URL")
	ErrNoModel   = errors.New("openai: no model name")
)

// New checks cfg and returns the Model.
func New(cfg Config) (*Model, error) {
	if cfg.BaseURL == "" {
		return nil, ErrNoBaseURL
	}
	if cfg.Model == "" {
		return nil, ErrNoModel
	}
	if cfg.ContextTokens < 0 {
		return nil, fmt.Errorf("openai: negative context budget %d", cfg.ContextTokens)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = DefaultBaseBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: DefaultResponseHeaderTimeout,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   32, // agents of one run share a server
			ForceAttemptHTTP2:     true,
		}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	roles := make(map[model.Role]string, len(cfg.RoleModels))
	for r, name := range cfg.RoleModels {
		if name != "" {
			roles[r] = name
		}
	}
	cfg.RoleModels = roles
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // retries are ours: bounded, before the first chunk, on our clock
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		// The SDK reads OPENAI_API_KEY itself when given no key: a Model
		// uses only the key of its Config.
		opts = append(opts, option.WithAPIKey(""))
	}
	if cfg.BreakerThreshold == 0 {
		cfg.BreakerThreshold = DefaultBreakerThreshold
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	brk := newBreaker(cfg.BreakerThreshold, base, probeModels(cfg.HTTPClient, base, cfg.APIKey), cfg.Sleep, cfg.Now, cfg.Logger)
	return &Model{cfg: cfg, client: oa.NewClient(opts...), log: cfg.Logger, brk: brk}, nil
}

// Unavailable reports whether the endpoint's circuit breaker is open,
// and why ("" when it is closed): for readiness (GET /readyz).
func (m *Model) Unavailable() string {
	if open, why := m.brk.state(); open {
		return why
	}
	return ""
}

// Endpoint is the server's API root (BaseURL).
func (m *Model) Endpoint() string { return m.cfg.BaseURL }

// Close closes the idle connections of the Model's HTTP client, once the
// engine that used it has shut down (a client given in Config is the
// caller's to close; Close closes its idle connections all the same).
func (m *Model) Close() {
	m.brk.stop()
	m.cfg.HTTPClient.CloseIdleConnections()
}

// Name returns the default model name.
func (m *Model) Name() string { return m.cfg.Model }

// ModelFor returns the model name of role.
func (m *Model) ModelFor(role model.Role) string {
	if n, ok := m.cfg.RoleModels[role]; ok {
		return n
	}
	return m.cfg.Model
}

// Factory returns a model.Factory that gives every run m (a real model
// ignores the scripted scenario).
func (m *Model) Factory() model.Factory {
	return func(messages.Scenario) (model.Model, error) { return m, nil }
}

// Params returns the chat completion request of req, as Stream sends it
// (tests and benchmarks look at it).
func (m *Model) Params(req model.Request) (oa.ChatCompletionNewParams, error) {
	p, _, err := m.params(req)
	return p, err
}

// params is Params, with the request's estimated tokens.
func (m *Model) params(req model.Request) (oa.ChatCompletionNewParams, int, error) {
	if SystemPrompt(req.Role) == "" {
		return oa.ChatCompletionNewParams{}, 0, fmt.Errorf("%w: openai: unknown role %d", model.ErrModel, int(req.Role))
	}
	tools := make([]oa.ChatCompletionToolUnionParam, 0, len(req.Tools))
	toolTokens := 0
	callable := req.Tools
	if plansTools(req.Role) {
		callable = nil // the tools a plan may give its nodes: listed in the task (newPrompt), not called
	}
	p := newPrompt(req, m.cfg.Inputs)
	names := p.names
	for _, t := range callable {
		var params shared.FunctionParameters // the SDK's type for a schema: any JSON object
		schema := t.Schema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		if err := json.Unmarshal(schema, &params); err != nil {
			return oa.ChatCompletionNewParams{}, 0, fmt.Errorf("%w: openai: the schema of tool %s: %v", model.ErrModel, t.Name, err)
		}
		def := shared.FunctionDefinitionParam{Name: names.wire(t.Name), Parameters: params}
		if t.Description != "" {
			def.Description = oa.String(clipDescription(t.Description))
		}
		tools = append(tools, oa.ChatCompletionFunctionTool(def))
		toolTokens += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(schema))
	}
	if !p.fit(m.cfg.ContextTokens, toolTokens) {
		m.log.Warn("openai: request over the context budget after dropping what can go",
			"agent", req.AgentID, "role", req.Role.String(), "budget", m.cfg.ContextTokens, "estimate", p.estimate(toolTokens))
	}
	params := oa.ChatCompletionNewParams{
		Model:         m.ModelFor(req.Role),
		Messages:      p.messages(),
		Tools:         tools,
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	if t := req.Temperature; t != nil { // a debater's contentiousness
		params.Temperature = oa.Float(*t)
	}
	if name, schema := responseFormat(req.Role); name != "" && !m.cfg.NoResponseFormat && !m.formatRefused() {
		params.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: name, Schema: schema, Strict: oa.Bool(false),
			}},
		}
	}
	return params, p.estimate(toolTokens), nil
}

// plansTools reports whether the role's request lists tools for a plan
// (the director's and the steerer's) rather than tools to call.
func plansTools(r model.Role) bool { return r == model.RoleDirector || r == model.RoleSteerer }

// responseFormat is the schema a role answers in, if any.
func responseFormat(r model.Role) (string, json.RawMessage) {
	switch r {
	case model.RoleDirector:
		return PlanSchemaName, planSchema
	case model.RoleSteerer:
		return DiffSchemaName, diffSchema
	}
	return "", nil
}

func (m *Model) formatRefused() bool { return m.noFormat.Load() }

// Stream starts one turn: it sends the request, retrying as the package
// documents, and returns once the first chunk has arrived.
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	params, estimate, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if err := m.gate(ctx); err != nil {
		return nil, m.failed(err)
	}
	formatFallback := false
	for attempt := 1; ; attempt++ {
		st, err := m.try(ctx, &req, params, estimate)
		if err == nil {
			m.brk.succeeded()
			if formatFallback && !m.noFormat.Swap(true) {
				m.log.Warn("openai: the server refused response_format json_schema; asking without it from now on", "model", params.Model)
			}
			return st, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		var apiErr *oa.Error
		isAPI := errors.As(err, &apiErr)
		if isAPI && apiErr.StatusCode == http.StatusBadRequest && params.ResponseFormat.OfJSONSchema != nil && !formatFallback {
			params.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{}
			formatFallback = true
			attempt-- // the fallback is not a retry
			continue
		}
		f := classify(err)
		if f.down {
			m.brk.failed(f.detail, f.code == model.CodeUnreachable)
		}
		fail := func(detail string) error {
			return m.failed(&model.Error{Code: f.code, Message: params.Model + ": " + detail, Err: err})
		}
		if !f.retryable {
			return nil, fail(f.detail)
		}
		wait := m.backoff(attempt)
		if isAPI && apiErr.Response != nil {
			if ra, ok := retryAfter(apiErr.Response.Header, m.cfg.Now()); ok {
				if ra > m.cfg.MaxRetryAfter {
					return nil, fail(fmt.Sprintf("the server asks to retry after %v (more than %v): %s", ra, m.cfg.MaxRetryAfter, f.detail))
				}
				wait = ra
			}
		}
		if attempt >= m.cfg.MaxAttempts {
			return nil, fail(fmt.Sprintf("%d attempts: %s", attempt, f.detail))
		}
		if err := m.gate(ctx); err != nil { // the endpoint is down: no more attempts
			return nil, m.failed(err)
		}
		m.log.Warn("openai: retrying", "model", params.Model, "agent", req.AgentID, "attempt", attempt, "class", f.code, "wait", wait, "err", err)
		if err := m.cfg.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// gate lets a turn's attempt go while the endpoint's breaker is closed;
// while it is open, it fails at once, or waits for it to close
// (Config.WaitWhenUnavailable).
func (m *Model) gate(ctx context.Context) error {
	if m.cfg.WaitWhenUnavailable {
		return m.brk.wait(ctx)
	}
	return m.brk.allow()
}

// try sends the request once and reads up to the first chunk: it returns
// the stream with that chunk taken, or the attempt's error.
func (m *Model) try(ctx context.Context, req *model.Request, params oa.ChatCompletionNewParams, estimate int) (*stream, error) {
	var res *http.Response
	// Post, not NewStreaming: the SDK builds, authenticates and sends the
	// request and turns error answers into *oa.Error, and its SSE decoder
	// splits the body into events; the chunks themselves are decoded here
	// (see wireChunk).
	opts := []option.RequestOption{option.WithJSONSet("stream", true)}
	if tp := spanid.Traceparent(ctx); tp != "" {
		// The turn's chat span (the engine put its context in ctx): the
		// server's own spans join the run's trace under it.
		opts = append(opts, option.WithHeader("traceparent", tp))
	}
	if err := m.client.Post(ctx, "chat/completions", params, &res, opts...); err != nil {
		if res != nil && res.Body != nil {
			_ = res.Body.Close()
		}
		return nil, err
	}
	dec := ssestream.NewDecoder(res)
	if dec == nil {
		return nil, errEmpty
	}
	st := &stream{ctx: ctx, dec: dec, req: req, model: params.Model, promptTokens: int64(estimate)}
	if err := st.first(); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// backoff is the wait after failed attempt n (1-based).
func (m *Model) backoff(n int) time.Duration {
	d := m.cfg.BaseBackoff
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}

// retryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or an
// HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// sleep is Config.Sleep's default.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
