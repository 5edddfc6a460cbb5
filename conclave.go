// Package conclave embeds Conclave, a runtime for councils of LLM agents,
// in a Go program.
//
// A council run is a director that plans a graph of nodes, nodes that run
// in dependency waves (streaming text and reasoning, calling tools,
// delegating to sub-agents), and a synthesiser that writes the answer.
// Every event of a run is numbered in its session, journaled, and
// delivered to any number of followers, in order, without gap or
// duplicate.
//
// Build an Engine with New, start runs with Engine.Start and follow them
// with Engine.Follow:
//
//	e, err := conclave.New(conclave.Options{Model: myModel, Tools: []tool.Tool{myTool}})
//	...
//	defer e.Shutdown(ctx)
//	run, err := e.Start(ctx, conclave.RunRequest{Question: "why is the sky blue"})
//	for ev, err := range e.Follow(ctx, run) { ... }
//
// A model implements model.Model; a typed Go function becomes a tool with
// tool.Func. Without a model the engine runs the deterministic scripted
// model of package model/scripted, whose behaviour a run's Scenario sets.
// The HTTP API, the SSE and WebSocket streams, AG-UI and A2A are
// http.Handlers to mount on the program's own mux (Engine.APIHandler and
// the others), each with its own Authenticate hook.
//
// The types an embedding program needs are re-exported here as aliases of
// their definitions in package messages (every wire format: the event
// envelope, every event type constant and payload, the types and named
// values they are made of, the API's answers such as RunCreated) and
// package actors (the engine's run references and quotas), so the common
// path imports only this package, model and tool. Every event type and
// payload is documented in docs/events.md. Test what you build with
// package testkit/conclavetest, which takes the same Options.
package conclave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/pricing"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/tool"
	"github.com/conclave-ai/conclave/tool/fetch"
	"github.com/conclave-ai/conclave/tool/workspace"
	"github.com/conclave-ai/conclave/transport"
)

// Options configure an Engine. The zero value is valid: the scripted
// model, its search tool, an in-memory journal, and no logging.
type Options struct {
	// Model answers the turns of every run. Set Model or Models, not both.
	// Default: the scripted model, built for each run from its Scenario.
	Model model.Model
	// Models builds the model of each run from the run's scenario (which a
	// real backend may ignore).
	Models model.Factory
	// Tools are the tools agents may call. The runtime's own tools
	// (delegate, ask_human, ask_choice, consult_advisor, spawn_subteam and the async task tools) are
	// always there besides them. With the scripted default model, the
	// scripted "search" tool is there too, unless Tools has a tool named
	// "search", which replaces it. Names must be unique.
	Tools []tool.Tool
	// Fetch, when set, adds the built-in fetch tool (an HTTP GET of a URL
	// as text, private and local addresses refused) configured by it; its
	// zero value is valid. See package tool/fetch.
	Fetch *fetch.Config
	// Workspace, when set, adds the built-in workspace tools
	// (workspace.write, workspace.read, workspace.list): a directory per
	// run, Workspace.Dir/<tenant>/<run id>, whose writes are published as file
	// events. The engine never removes it. See package tool/workspace.
	Workspace *workspace.Config
	// FileURLs, when set, lets runs attach files by URL (StartRun.Files)
	// from under its Prefixes: the engine fetches them before the run
	// starts, through the fetch tool's address guard. Without it a URL
	// file is refused (file_url_not_allowed). See fetch.FilesConfig.
	FileURLs *fetch.FilesConfig
	// Remote are the remote agents a plan node (its "agent") or a delegate
	// call may name: build it with remote.Registry.Add, each agent an
	// a2aclient.Agent (a2aclient.Dial fetches its card). Default: none.
	Remote *remote.Registry
	// Journal stores the events. The engine never closes a journal it was
	// given: close it after Shutdown returns (see OpenJournal). Default: a
	// new in-memory journal, which keeps nothing after the process ends.
	Journal Journal
	// KeepRunsOnShutdown makes Shutdown freeze live runs instead of ending
	// them with run_error{code:"interrupted"}: the next engine on the same
	// durable Journal resumes them, parked runs still parked on the same
	// interrupts. It needs a Journal.
	KeepRunsOnShutdown bool
	// Logger receives the engine's logs. Default: discard.
	Logger *slog.Logger
	// Concurrency caps the nodes of one wave running at once, for runs
	// that do not set their own. Default 8.
	Concurrency int
	// InterruptTimeout is how long an interrupt waits for a human, for
	// runs that do not set their own. Default 10 minutes.
	InterruptTimeout time.Duration
	// ToolTimeout bounds a tool call whose definition sets no timeout.
	// Default 1 minute.
	ToolTimeout time.Duration
	// ToolParallel bounds the tool calls of one model turn running at
	// once. Default 4.
	ToolParallel int
	// ModelIdleTimeout bounds the wait for each chunk of a model turn,
	// the first one included: a model silent for longer (a server that
	// hangs, sends only keep-alive comments, or never answers) fails its
	// agent's lane with code "timeout". Default 5 minutes; negative: no
	// bound.
	ModelIdleTimeout time.Duration
	// ModelTurnTimeout bounds one model turn, likewise. Default 30
	// minutes; negative: no bound.
	ModelTurnTimeout time.Duration
	// MaxDeltaBytes bounds one text_delta or reasoning_delta event: a
	// larger chunk from the model is published as several events. Default
	// 64 KiB.
	MaxDeltaBytes int
	// MaxAgentTurns bounds the model turns of one agent: past it the agent
	// fails with code turn_limit (a model that calls tools every turn
	// would loop without end). Default actors.DefaultMaxAgentTurns (25);
	// negative: no bound.
	MaxAgentTurns int
	// MaxTurnOutputBytes bounds the text and reasoning of one model turn:
	// at the bound the text is cut, a warning output_truncated is
	// published and the turn ends. Default 4 MiB; negative: no bound.
	MaxTurnOutputBytes int
	// Limits returns a tenant's quotas (zero fields take the defaults of
	// Limits). Default: the defaults for every tenant.
	Limits func(Tenant) Limits
	// Prices are the model prices a run's cost is estimated at, for the
	// cost budgets of Limits (CostPerRun, CostPerDay) and of a run's
	// StartRun.Budget. Default pricing.Default(); a model without a price
	// has an unknown cost, which a cost budget refuses (never counted as
	// free).
	Prices *pricing.Table
	// Audit, when set, records every decision in this audit log (package
	// audit, docs/audit.md), and the API handler serves it at GET
	// /api/v1/audit. The engine never closes it: close it after Shutdown
	// returns. Call its CatchUp with the Journal before New, so decisions
	// journaled by a process that died before recording them are not lost.
	Audit *audit.Log
	// Supervision chooses, per role (director, worker, subagent, debater,
	// team), how a failing agent is supervised: one-for-one, all-for-one
	// or stop, its restart limit and window, and its backoff
	// (docs/supervision.md). A run's StartRun.Supervision applies over it.
	// Default nil: one-for-one for every role but debaters (all-for-one:
	// their round), 3 restarts a minute, 100 ms first backoff.
	Supervision *Supervision
	// Billing, when set, is the tenant budget pre-flight hook: a billing
	// service asked before each run starts and before each model turn,
	// which may deny with insufficient_budget or tenant_suspended
	// (docs/api.md#billing-pre-flight). A denied start is a *QuotaError;
	// a denied turn ends its run with run_error of that code.
	Billing *BillingOptions
	// HTTP configures the handlers.
	HTTP HTTPOptions
}

// BillingOptions configure the billing pre-flight hook.
type BillingOptions struct {
	// URL is the billing service's endpoint, http or https: each check is
	// a POST of JSON to it.
	URL string
	// Timeout bounds one check. Default 2 s.
	Timeout time.Duration
	// FailOpen allows a run or turn whose check failed (no answer in
	// time, a status other than 200, an answer that is not a decision);
	// by default it is denied with insufficient_budget.
	FailOpen bool
	// Header is added to every check (an Authorization).
	Header http.Header
}

// gate is the billing hook of o (nil for nil options).
func (o *BillingOptions) gate() (*billing.Gate, error) {
	if o == nil {
		return nil, nil
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Billing.URL %q must be an http or https URL", o.URL)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("Billing.Timeout %v is negative", o.Timeout)
	}
	return &billing.Gate{Checker: &billing.HTTPChecker{URL: o.URL, Timeout: o.Timeout, Header: o.Header.Clone()}, FailOpen: o.FailOpen}, nil
}

// HTTPOptions configure the handlers an Engine serves (Engine.APIHandler
// and the others). The zero value is valid. Connection limits and
// timeouts belong to the program's own http.Server.
type HTTPOptions struct {
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may open WebSockets and read the API cross-origin; "*" allows any.
	// Requests without an Origin header (non-browsers) are always allowed.
	AllowedOrigins []string
	// Heartbeat is the interval of SSE heartbeats and WebSocket pings on
	// idle streams. Default 10 s.
	Heartbeat time.Duration
	// FlushDelay lets a woken stream wait this long before it writes, so
	// events arriving meanwhile share one write. Default 0: at once.
	FlushDelay time.Duration
	// MaxStreams caps the open streams (SSE, WebSocket, AG-UI, A2A); over
	// it a stream request gets 429. Default: derived from the process's
	// file descriptor limit. Negative: no cap.
	MaxStreams int
	// MaxStreamsPerTenant caps one tenant's open streams. Default 0: no
	// cap below MaxStreams.
	MaxStreamsPerTenant int
	// MaxBody bounds request bodies. Default 1 MiB.
	MaxBody int64
}

// Engine runs councils. Create it with New and stop it with Shutdown. Its
// methods are safe for concurrent use.
type Engine struct {
	engine *actors.Engine
	http   *transport.Server
	files  *fetch.Files // nil without Options.FileURLs

	shutMu sync.Mutex // serialises Shutdown
	done   chan struct{}
}

// New starts an engine. With a Journal that already holds events, the
// runs that had not ended are rebuilt from it before New returns.
func New(opts Options) (*Engine, error) {
	if opts.Model != nil && opts.Models != nil {
		return nil, fmt.Errorf("%w: set Options.Model or Options.Models, not both", ErrInvalidOptions)
	}
	if opts.KeepRunsOnShutdown && opts.Journal == nil {
		return nil, fmt.Errorf("%w: KeepRunsOnShutdown needs a Journal that outlives the engine", ErrInvalidOptions)
	}
	if err := opts.Supervision.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	gate, err := opts.Billing.gate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	cfg := actors.Config{
		Logger: opts.Logger, Journal: opts.Journal, KeepRunsOnShutdown: opts.KeepRunsOnShutdown,
		Concurrency: opts.Concurrency, InterruptTimeout: opts.InterruptTimeout,
		ToolTimeout: opts.ToolTimeout, ToolParallel: opts.ToolParallel, Limits: opts.Limits,
		ModelIdleTimeout: opts.ModelIdleTimeout, ModelTurnTimeout: opts.ModelTurnTimeout,
		MaxDeltaBytes: opts.MaxDeltaBytes, MaxTurnOutputBytes: opts.MaxTurnOutputBytes, MaxAgentTurns: opts.MaxAgentTurns,
		Prices: opts.Prices, Remote: opts.Remote, Supervision: opts.Supervision, Billing: gate,
	}
	var files *fetch.Files
	if opts.FileURLs != nil {
		f, err := fetch.NewFiles(*opts.FileURLs)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		cfg.FileFetcher, files = f, f
	}
	tools := slices.Clone(opts.Tools)
	builtin, err := builtinTools(opts.Fetch, opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	tools = append(tools, builtin...)
	switch {
	case opts.Model != nil:
		m := opts.Model
		cfg.Models = func(Scenario) (model.Model, error) { return m, nil }
	case opts.Models != nil:
		cfg.Models = opts.Models
	default:
		cfg.Models = scripted.NewFactory().Model
		if !slices.ContainsFunc(tools, func(t tool.Tool) bool { return t.Def().Name == model.ToolSearch }) {
			tools = append([]tool.Tool{scripted.SearchTool()}, tools...)
		}
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	cfg.Tools = set
	var reader transport.AuditReader
	if opts.Audit != nil { // not a typed nil in the interfaces
		cfg.Audit, reader = opts.Audit, opts.Audit
	}
	engine, err := actors.New(cfg)
	if err != nil {
		return nil, err
	}
	h := opts.HTTP
	srv, err := transport.New(transport.Config{
		Engine: engine, Audit: reader, Logger: opts.Logger, AllowedOrigins: h.AllowedOrigins, Heartbeat: h.Heartbeat,
		FlushDelay: h.FlushDelay, MaxStreams: h.MaxStreams, MaxStreamsPerTenant: h.MaxStreamsPerTenant, MaxBody: h.MaxBody,
	})
	if err != nil {
		return nil, errors.Join(err, engine.Shutdown(context.Background()))
	}
	return &Engine{engine: engine, http: srv, files: files, done: make(chan struct{})}, nil
}

var _ actors.FileFetcher = (*fetch.Files)(nil)

// ErrInvalidOptions is returned by New for Options it cannot run with.
var ErrInvalidOptions = errors.New("conclave: invalid options")

// Shutdown stops the engine: it refuses new runs, ends every live run with
// run_error{code:"interrupted"} (or freezes it, with KeepRunsOnShutdown),
// lets every follower and stream deliver what was journaled, closes the
// streams of the mounted handlers, and waits for every goroutine the
// engine started. Call it before shutting down the http.Server that
// serves the handlers: that server would wait for the AG-UI and A2A
// streams, which only this ends, and knows nothing of the SSE and
// WebSocket streams, whose connections are taken over from it. It is
// idempotent and returns ctx.Err() if ctx ends first; a later call
// finishes the job.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.shutMu.Lock()
	defer e.shutMu.Unlock()
	select {
	case <-e.done:
		return nil
	default:
	}
	// The engine first, so streams carry the runs' terminal events.
	if err := e.engine.Shutdown(ctx); err != nil {
		return err
	}
	if err := e.http.Shutdown(ctx); err != nil {
		return err
	}
	if e.files != nil {
		e.files.Close()
	}
	close(e.done)
	return nil
}

// builtinTools are the built-in tools the options ask for.
func builtinTools(f *fetch.Config, w *workspace.Config) ([]tool.Tool, error) {
	var tools []tool.Tool
	if f != nil {
		ft, err := fetch.New(*f)
		if err != nil {
			return nil, err
		}
		tools = append(tools, ft)
	}
	if w != nil {
		ws, err := workspace.New(*w)
		if err != nil {
			return nil, err
		}
		tools = append(tools, ws.Tools()...)
	}
	return tools, nil
}

// Done is closed when Shutdown has finished.
func (e *Engine) Done() <-chan struct{} { return e.done }

// OpenJournal opens the durable journal in dir for Options.Journal,
// creating it if dir is missing or empty: an event is acknowledged when it
// is fsynced, and a restart loses nothing acknowledged. The caller closes
// it, after Engine.Shutdown returns. It fails with journal.ErrLocked when
// another process uses dir, and with a *journal.DamageError when
// acknowledged events were lost or garbled (see JournalOptions.Repair).
func OpenJournal(dir string, opts JournalOptions) (Journal, error) {
	d, err := journal.Open(dir, opts)
	if err != nil {
		return nil, err // a nil *Durable must not become a non-nil Journal
	}
	return d, nil
}
