// Package actors is Conclave's supervision tree, built on protoactor-go:
//
//	engine (root actor: registry of sessions and runs)
//	├── hub-<session>          one per session: seq, journal, fan-out
//	└── run-<run>              run supervisor, one per run
//	    ├── director           plans the DAG
//	    ├── <node id> ...      one council-node agent per plan node
//	    │   └── sub<k> ...     sub-agents delegated to by the node
//	    └── synthesizer        composes the answer
//
// Every event an agent produces is sent to its session's hub, which numbers
// it, appends it to the journal and fans it out to subscribers. Supervision
// strategies are documented in supervision.go.
//
// Actors stay thin: queues and cursors live in actors/feed, plan validation
// and waves in actors/dag, the journal in package journal.
package actors

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/actors/budget"
	"github.com/conclave-ai/conclave/actors/coalesce"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/internal/redact"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/pricing"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/tool"
)

// Errors returned by the Engine.
var (
	ErrShuttingDown    = errors.New("actors: engine is shutting down")
	ErrSessionNotFound = errors.New("actors: session not found")
	ErrRunNotFound     = errors.New("actors: run not found")
	ErrRunTerminal     = errors.New("actors: run already ended")
	ErrCursorAhead     = errors.New("actors: cursor is ahead of the session's last event")
	ErrInvalidRequest  = errors.New("actors: invalid request")

	// Interrupt resumes: see package interrupts for the states.
	ErrInterruptNotFound = interrupts.ErrNotFound
	ErrInterruptConflict = interrupts.ErrConflict
	ErrInterruptResolved = interrupts.ErrResolved // also an ErrInterruptConflict
	ErrInterruptExpired  = interrupts.ErrExpired
)

// InvalidResumeError is a resume that lacks what its interrupt's kind needs;
// the interrupt stays pending.
type InvalidResumeError = interrupts.InvalidError

// SignatureError is a signed resume whose signature was refused
// (governance: a bad, unknown, duplicate or misdirected signature).
type SignatureError = interrupts.SignatureError

// Config configures an Engine. The zero value is valid.
type Config struct {
	// Logger receives the engine's and protoactor's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock for event timestamps. Default: time.Now.
	Now func() time.Time
	// NewID makes event, run and session ids. Default: uuid.New.
	NewID func() uuid.UUID
	// MarkerID makes the ids of replay_truncated markers, which go to one
	// subscriber and are never journaled. Default: NewID. A simulation
	// gives them a source of their own, so that when subscribers read
	// (which depends on the Go scheduler) never shifts the ids of the
	// events the journal keeps.
	MarkerID func() uuid.UUID
	// Journal stores events; the caller closes it after Shutdown. It must
	// keep a run catalogue too (journal.Catalog, as journal.Memory and
	// journal.Durable do): ended runs are read from there. Default: a new
	// in-memory journal, left open so lagging subscriptions can drain.
	Journal journal.Journal
	// Models builds the model of each run. Default: the scripted model.
	Models model.Factory
	// FileFetcher fetches the files a run attaches by URL (StartRun.Files)
	// before the run starts; nil: a URL file is refused
	// (file_url_not_allowed).
	FileFetcher FileFetcher
	// Tools are the tools agents may call besides the runtime's own
	// (tool.Builtins). Default: the scripted tools (search, and the
	// high-risk publish).
	Tools *tool.Set
	// Remote are the remote agents a plan node may name (PlanNode.Agent):
	// such a node runs as the agent's task (remote.go). Default: none (a
	// node naming one fails).
	Remote *remote.Registry
	// ToolTimeout bounds a tool call whose definition sets no timeout.
	// Default DefaultToolTimeout.
	ToolTimeout time.Duration
	// ModelIdleTimeout bounds the wait for each chunk of a model turn (the
	// first one included): a model silent for longer fails the turn with
	// a *model.Error of code timeout (model.WithTimeouts). Default
	// DefaultModelIdleTimeout; negative: no bound.
	ModelIdleTimeout time.Duration
	// ModelTurnTimeout bounds a whole model turn, likewise. Default
	// DefaultModelTurnTimeout; negative: no bound.
	ModelTurnTimeout time.Duration
	// MaxAgentTurns bounds the model turns of one agent (each turn that
	// calls tools is followed by another): at 80 % of it the agent's lane
	// gets a warning turn_limit_near, past it the agent fails with a
	// *model.Error of code turn_limit. Default DefaultMaxAgentTurns (as
	// LangGraph's recursion limit); negative: no bound.
	MaxAgentTurns int
	// MaxDeltaBytes bounds one text or reasoning delta event: a longer
	// chunk from the model is published as several events, cut at rune
	// boundaries. Default DefaultMaxDeltaBytes.
	MaxDeltaBytes int
	// MaxTurnOutputBytes bounds the text and reasoning of one model turn:
	// at the bound the text is cut, a warning output_truncated is
	// published, and the turn ends as if the model had stopped (tool
	// calls it had not finished are not made). Default
	// DefaultMaxTurnOutputBytes; negative: no bound.
	MaxTurnOutputBytes int
	// Governance, when set, gives tenants approvers and a policy: an
	// approval whose risk level the policy covers needs m of n approvers'
	// ML-DSA-65 signatures (docs/governance.md).
	Governance *governance.Config
	// Audit, when set, records every decision (package audit): each
	// session's hub hands it the events of a batch once they are
	// journaled, before anyone is told of them. The caller closes it
	// after Shutdown.
	Audit Auditor
	// Observers are told of every journaled event (metrics, logs): each
	// session's hub hands them the events of a batch once journaled, in
	// seq order, after the audit log and before subscribers get them.
	Observers []Observer
	// Secrets are values that must never be recorded or shown (the
	// model's API key, bearer tokens, variables passed to tool servers):
	// every event is journaled and streamed with them masked, tool
	// results reach the model masked, and so do the engine's logs
	// (internal/redact). Values under redact.MinLen bytes are ignored.
	Secrets []string
	// ToolParallel bounds the calls of one model turn running at once.
	// Default DefaultToolParallel.
	ToolParallel int
	// ProgressInterval is the least time between two tool_call_progress
	// events of one call: reports in between are coalesced, the latest
	// going out when the interval ends (actors/coalesce), so a tool that
	// reports a thousand times a second costs four events a second.
	// Default DefaultProgressInterval (250ms).
	ProgressInterval time.Duration
	// SubscriberQueue bounds each subscriber's live queue. Default: feed.DefaultQueue.
	SubscriberQueue int
	// RestartLimit is how many times an agent may be restarted after a panic
	// within RestartWindow before it is stopped and counted as failed. Default 3.
	RestartLimit int
	// RestartWindow is the window of RestartLimit. Default one minute.
	RestartWindow time.Duration
	// RestartBackoff is how long an agent restarted after its first
	// failure (a panic, a transient model error) waits before it runs
	// again; each further failure doubles it, up to RestartBackoffMax, and
	// every wait varies by up to ±20 % (restartBackoff). Defaults 100 ms
	// and 10 s; a negative RestartBackoff restarts at once.
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// Billing, when set, is the tenant budget pre-flight hook: it is
	// asked before each run starts (a denial refuses StartRun with a
	// QuotaError, QuotaInsufficientBudget or QuotaTenantSuspended) and
	// before each model turn (a denial ends the run with run_error
	// insufficient_budget or tenant_suspended). See package billing.
	Billing *billing.Gate
	// Supervision is the server's choice, per role, of how agents are
	// supervised (strategy, restart limit, window, backoff) over the
	// limits above; a run's StartRun.Supervision is applied over it, and
	// run_started records the result. nil: one-for-one for every role but
	// debaters (all-for-one: their round) with the limits above.
	Supervision *messages.Supervision
	// Concurrency is the default cap on nodes of one wave running at once. Default 8.
	Concurrency int
	// InterruptTimeout is how long an interrupt waits for a human unless
	// the run asks otherwise. Default 10 minutes.
	InterruptTimeout time.Duration
	// HubIdleAfter is how long a session may go without a live run, a
	// subscriber or an event before its hub stops (it starts again from
	// the journal on the next request). Default DefaultHubIdleAfter;
	// negative: hubs never stop for idleness.
	HubIdleAfter time.Duration
	// SleepAfter is how long a run waits only on humans, publishing
	// nothing, before it falls asleep: its actors stop and leave memory,
	// its interrupts stay pending, and it is rebuilt from the journal when
	// an answer, a timeout, an abort or a steering note needs it
	// (asleep.go). Default DefaultSleepAfter; negative: runs never sleep.
	SleepAfter time.Duration
	// Limits returns a tenant's quotas (Limits.WithDefaults fills the zero
	// fields). Default: the defaults for every tenant.
	Limits func(messages.TenantID) Limits
	// Prices are the model prices a run's cost is estimated at (its
	// token_usage events), for the cost budgets of Limits and of a run's
	// request. Default: pricing.Default(). A model it has no price for
	// has an unknown cost, never 0 (package budget).
	Prices *pricing.Table
	// KeepRunsOnShutdown makes Shutdown freeze live runs instead of ending
	// them with run_error{code:"interrupted"}: nothing more is published,
	// and the next engine on the same (durable) journal resumes them, parked
	// runs still parked on the same interrupts. Use it with a journal that
	// outlives the process.
	KeepRunsOnShutdown bool
	// Placement, when set, makes the engine one node of a cluster
	// (cluster.Node): it recovers no session at startup (a session comes
	// to this node by Adopt, when it takes the session over), and
	// StartRun and Rewind first claim the new run's session, failing with
	// Placement's error when another live node owns it.
	Placement Placement
	// Followers, when set, serves Subscribe (cluster.Followers): a node
	// follows the sessions its clients watch from the shared journal,
	// whichever node owns them.
	Followers Followers
	// Dispatcher runs every actor of the engine (supervisors, agents,
	// hubs). Default: protoactor's, a goroutine per busy mailbox. A
	// deterministic simulation (testkit/sim) runs them all on one goroutine
	// in the order their messages were scheduled, so that the same inputs
	// give the same event order. Whoever passes one keeps it running until
	// Shutdown has returned.
	Dispatcher actor.Dispatcher
	// Tracer, when set, turns runs' events into OpenTelemetry spans
	// (internal/telemetry): every run gets a trace id (run_started's), and
	// model requests and tool calls carry the span context of their turn's
	// or call's span. Nil: no tracing, and no cost.
	Tracer Tracer
}

// Tracer receives the events that make a run's spans (telemetry.Tracer).
// Observe is called by every session's hub, concurrently, with each batch
// of tenant's events once journaled, in seq order; it must not block and
// must not modify the events. Resumed is called when a run is rebuilt from
// the journal to go on working (a restart, a takeover), before any of its
// new events is observed.
type Tracer interface {
	Observer
	Resumer
}

// Resumer is told of each run rebuilt from the journal to go on working
// (a restart, a takeover), before any of its new events is observed: an
// Observer that keeps something per run since its run_started (a trace id)
// implements it, as a Tracer does.
type Resumer interface {
	Resumed(run messages.RunID, started *messages.RunStartedPayload)
}

// Auditor records the decisions among journaled events (audit.Log).
// Record is called by every session's hub, concurrently, with each batch
// of tenant's session (key is its journal key, JournalKey) once journaled,
// in seq order; it must be durable when it returns nil.
type Auditor interface {
	Record(ctx context.Context, tenant messages.TenantID, key messages.SessionID, events []*messages.Envelope) error
}

// Observer watches journaled events (Config.Observers): package
// internal/runmetrics turns them into Prometheus metrics, internal/runlog
// into log lines. Observe is called by every session's hub, concurrently,
// with each batch of the tenant's session once journaled, in seq order.
// It runs on the hub's mailbox, so it must not block; it must neither keep
// nor change the envelopes. Events a process rebuilds from the journal at
// startup are not observed again.
type Observer interface {
	Observe(tenant messages.TenantID, events []*messages.Envelope)
}

// MaxConcurrency caps StartRun.Concurrency.
const MaxConcurrency = messages.MaxConcurrency

// Config defaults: the nodes of a wave running at once, and how long an
// interrupt waits for a human.
const (
	DefaultConcurrency      = 8
	DefaultInterruptTimeout = 10 * time.Minute
	DefaultToolTimeout      = time.Minute
	DefaultToolParallel     = 4
	// DefaultModelIdleTimeout matches the OpenAI backend's wait for an
	// answer's headers: a local server may read a long prompt, or a
	// reasoning model think, that long without sending anything.
	DefaultModelIdleTimeout = 5 * time.Minute
	// DefaultModelTurnTimeout bounds one turn: long enough for a long
	// answer from a slow local model.
	DefaultModelTurnTimeout = 30 * time.Minute
	// DefaultMaxAgentTurns is LangGraph's default recursion limit.
	DefaultMaxAgentTurns = 25
	// DefaultProgressInterval: at most four tool_call_progress events a
	// second per call.
	DefaultProgressInterval = coalesce.DefaultInterval
)

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
	if c.MarkerID == nil {
		c.MarkerID = c.NewID
	}
	if c.Models == nil {
		c.Models = scripted.NewFactory().Model
	}
	if c.Tools == nil {
		c.Tools = defaultTools
	}
	if c.ToolTimeout == 0 {
		c.ToolTimeout = DefaultToolTimeout
	}
	if c.ToolParallel == 0 {
		c.ToolParallel = DefaultToolParallel
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.MaxDeltaBytes <= 0 {
		c.MaxDeltaBytes = DefaultMaxDeltaBytes
	}
	if c.MaxTurnOutputBytes == 0 {
		c.MaxTurnOutputBytes = DefaultMaxTurnOutputBytes
	}
	if c.ModelIdleTimeout == 0 {
		c.ModelIdleTimeout = DefaultModelIdleTimeout
	}
	if c.MaxAgentTurns == 0 {
		c.MaxAgentTurns = DefaultMaxAgentTurns
	}
	if c.ModelTurnTimeout == 0 {
		c.ModelTurnTimeout = DefaultModelTurnTimeout
	}
	if c.RestartLimit == 0 {
		c.RestartLimit = 3
	}
	if c.RestartBackoff == 0 {
		c.RestartBackoff = 100 * time.Millisecond
	}
	if c.RestartBackoffMax == 0 {
		c.RestartBackoffMax = 10 * time.Second
	}
	if c.RestartWindow == 0 {
		c.RestartWindow = time.Minute
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.InterruptTimeout == 0 {
		c.InterruptTimeout = DefaultInterruptTimeout
	}
	if c.HubIdleAfter == 0 {
		c.HubIdleAfter = DefaultHubIdleAfter
	}
	if c.SleepAfter == 0 {
		c.SleepAfter = DefaultSleepAfter
	}
	if c.Prices == nil {
		c.Prices = pricing.Default()
	}
	return c
}

// Engine runs councils. Create it with New and stop it with Shutdown.
type Engine struct {
	cfg     Config
	system  *actor.ActorSystem
	root    *actor.PID // the engine actor
	index   *runindex.Index
	catalog journal.Catalog // Config.Journal's run catalogue
	// ledger is every tenant's model spend of the current UTC day
	// (spend.go), rebuilt from the journal by New.
	ledger     *budget.Ledger
	costs      costCounter // estimated cost by model and role (costs.go)
	summaries  *summaryWriter
	store      routine.Group // the summary writer
	interrupts *interrupts.Registry
	turns      routine.Group
	// toolRuns are the tool calls in progress (toolcalls.go); toolCtx ends
	// them all at shutdown.
	toolRuns routine.Group
	// redact masks Config.Secrets (nil: none).
	redact     *redact.Redactor
	toolCtx    context.Context
	toolCancel context.CancelFunc
	background routine.Group // the idle-hub sweeper, and sessions being given up (placement.go)
	// releaseSlots bounds the sessions given up at once (maxReleases).
	releaseSlots chan struct{}
	stopSweep    chan struct{}
	// legacy maps the sessions journaled by earlier versions (without a
	// tenant in their key) to their key. Written by recovery before New
	// returns, read-only afterwards.
	legacy       map[sessKey]messages.SessionID
	legacyTenant map[messages.SessionID]messages.TenantID // the reverse of legacy
	closing      atomic.Bool
	// reqMu and actorStopped: see request.
	reqMu        sync.RWMutex
	actorStopped bool
	frozen       atomic.Bool    // shutting down without ending runs: nothing more is published
	restoring    sync.WaitGroup // rebuilt runs and agents not yet back in place (recover.go)
	published    atomic.Uint64
	hubCount     atomic.Int64 // hubs in memory (Stats)
	runCount     atomic.Int64 // runs not ended: supervisors alive, and runs asleep (Stats)
	asleepCount  atomic.Int64 // runs asleep (Stats)
	done         chan struct{}
	shutdownMu   sync.Mutex
	shutStage    int // under shutdownMu: how far Shutdown got (see there)
}

// RunRef names a started run.
type RunRef struct {
	Tenant    messages.TenantID
	RunID     messages.RunID
	SessionID messages.SessionID
}

// New starts an engine.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	red := redact.New(cfg.Secrets...)
	cfg.Logger = slog.New(red.Handler(cfg.Logger.Handler()))
	if cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency {
		return nil, fmt.Errorf("%w: concurrency %d not in 1..%d", ErrInvalidRequest, cfg.Concurrency, MaxConcurrency)
	}
	if err := cfg.Supervision.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	e := &Engine{cfg: cfg, redact: red, done: make(chan struct{}), index: runindex.New(), interrupts: interrupts.New(cfg.Now), releaseSlots: make(chan struct{}, maxReleases),
		stopSweep: make(chan struct{}), legacy: map[sessKey]messages.SessionID{}, legacyTenant: map[messages.SessionID]messages.TenantID{}}
	e.toolCtx, e.toolCancel = context.WithCancel(context.Background())
	if cfg.Journal == nil {
		// Never closed: a memory journal holds nothing but memory, and
		// staying readable lets subscriptions that lag behind drain their
		// tail after Shutdown instead of failing with journal.ErrClosed.
		e.cfg.Journal = journal.NewMemory()
	}
	cat, ok := e.cfg.Journal.(journal.Catalog)
	if !ok {
		return nil, fmt.Errorf("%w: the journal (%T) keeps no run catalogue (journal.Catalog)", ErrInvalidRequest, e.cfg.Journal)
	}
	e.catalog = cat
	e.ledger = budget.NewLedger(cfg.Now)
	if cfg.Placement == nil {
		// Before recovery resumes any run: what they spend from now on is
		// counted live, on top of what the journal holds. A cluster node
		// recovers nothing at start (its sessions come by Adopt, the
		// journal is every node's): its day counts the runs it served
		// since it started (docs/cluster.md).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := e.restoreDay(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("actors: rebuild today's spend from the journal: %w", err)
		}
	}
	e.summaries = newSummaryWriter(e, cat, e.index)
	e.store.Go(e.summaries.run)
	logger := cfg.Logger.With("component", "protoactor")
	e.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
		actor.WithDeadLetterRequestLogging(false),
	)
	props := e.props(func() actor.Actor { return newEngineActor(e) },
		actor.WithSupervisor(engineStrategy(e.cfg)))
	root, err := e.system.Root.SpawnNamed(props, "engine")
	if err != nil {
		return nil, fmt.Errorf("actors: spawn engine: %w", err)
	}
	e.root = root
	// Rebuild sessions and runs from a journal that already holds events.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := e.system.Root.RequestFuture(root, &recoverReq{}, 5*time.Minute).Result()
	if err == nil {
		err = res.(*recoverDone).err
	}
	if err == nil { // every rebuilt run back in place (parked ones resumable) before New returns
		done := make(chan struct{})
		go func() { e.restoring.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.New("runs were not back in place in time")
		}
	}
	if err != nil {
		_ = e.Shutdown(ctx)
		return nil, fmt.Errorf("actors: recover from the journal: %w", err)
	}
	if every := e.cfg.HubIdleAfter / 2; every > 0 {
		e.background.Go(func() { e.sweepLoop(every, &sweepIdle{}) })
	}
	if every := e.cfg.SleepAfter / 2; every > 0 {
		e.background.Go(func() { e.sweepLoop(every, &sweepParked{}) })
	}
	return e, nil
}

// props are the props of one of the engine's actors: on Config.Dispatcher
// when there is one.
func (e *Engine) props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	if e.cfg.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(e.cfg.Dispatcher))
	}
	return actor.PropsFromProducer(producer, opts...)
}

// sweepLoop sends the engine actor msg every interval, until Shutdown: a
// sweep of idle hubs, or of parked runs.
func (e *Engine) sweepLoop(every time.Duration, msg any) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-e.stopSweep:
			return
		case <-tick.C:
			e.system.Root.Send(e.root, msg)
		}
	}
}

// request sends msg to the engine actor and waits for its reply. Requests
// hold reqMu for reading; Shutdown takes it for writing before it stops the
// engine actor, so every request is either answered or refused with
// ErrShuttingDown, never left waiting on an actor that is gone.
func (e *Engine) request(ctx context.Context, msg any) (any, error) {
	e.reqMu.RLock()
	defer e.reqMu.RUnlock()
	if e.actorStopped {
		return nil, ErrShuttingDown
	}
	timeout := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	for {
		f := e.system.Root.RequestFuture(e.root, msg, timeout)
		res, err := f.Result()
		if err != nil {
			return nil, fmt.Errorf("actors: engine did not answer: %w", err)
		}
		var stopping errHubStopping
		if err, ok := res.(error); ok && errors.As(err, &stopping) {
			// The session's idle hub is stopping: ask again once it has
			// stopped, when a new hub can take the session over.
			select {
			case <-stopping.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err, ok := res.(error); ok {
			return nil, err
		}
		return res, nil
	}
}

// StartRun validates cmd, then starts a run in cmd.SessionID (a new session
// when empty). The run proceeds in the background; follow it with Subscribe.
func (e *Engine) StartRun(ctx context.Context, cmd messages.StartRun) (RunRef, error) {
	if e.closing.Load() {
		return RunRef{}, ErrShuttingDown
	}
	files, err := fetchFiles(ctx, e.cfg.FileFetcher, cmd.Files)
	if err != nil {
		return RunRef{}, err
	}
	cmd.Files = files
	spec, err := e.prepareRun(cmd)
	if err != nil {
		return RunRef{}, err
	}
	return e.start(ctx, spec)
}

// start spawns a prepared run and returns once its run_started is
// acknowledged by the journal (durable), so an accepted run is never lost.
func (e *Engine) start(ctx context.Context, spec *runSpec) (RunRef, error) {
	if err := e.preflightRun(ctx, spec); err != nil {
		return RunRef{}, err
	}
	var (
		res any
		err error
	)
	for attempt := 0; ; attempt++ {
		if p := e.cfg.Placement; p != nil { // a cluster node: only the session's owner starts runs in it
			if err := p.Claim(ctx, sessKey{spec.tenant, spec.session}.journalKey()); err != nil {
				return RunRef{}, err
			}
		}
		res, err = e.request(ctx, &startRunReq{spec: spec})
		if !errors.Is(err, errNotHeld) || attempt == 3 {
			break
		}
		// The session went idle and was given up between the claim and
		// the start: claim it again.
	}
	if err != nil {
		return RunRef{}, err
	}
	sr := res.(*startedRun)
	select {
	case <-sr.acked:
		if err := sr.hub.ackErr(); err != nil {
			return sr.ref, fmt.Errorf("actors: run %s not started: the journal failed: %w", sr.ref.RunID, err)
		}
		return sr.ref, nil
	case <-ctx.Done():
		return sr.ref, fmt.Errorf("actors: run %s started, but its start was not acknowledged by the journal in time: %w", sr.ref.RunID, ctx.Err())
	case <-e.done:
		return sr.ref, ErrShuttingDown
	}
}

func (e *Engine) prepareRun(cmd messages.StartRun) (*runSpec, error) {
	o, err := cmd.Options(e.runDefaults())
	if fe := (*messages.FileError)(nil); errors.As(err, &fe) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, fe) // its code says more than bad_request
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if err := e.checkCalls(o.Scenario.Calls); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if o.SessionID == "" {
		o.SessionID = messages.SessionID(e.cfg.NewID().String())
	}
	// Checked whatever the hitl mode: a human who could reject nodes could
	// also approve them all, and a run parked on its plan gate already
	// holds its whole plan.
	if budget := e.limits(o.Tenant).EventsPerRun; budget > 0 {
		if n := o.Scenario.MinEvents(); n > budget {
			return nil, &QuotaError{Code: QuotaScenarioTooLarge, Tenant: o.Tenant,
				Message: fmt.Sprintf("the scenario needs at least %d events, over the run's budget of %d (events_per_run quota)", n, budget)}
		}
	}
	b, err := runBudget(o.Tenant, e.limits(o.Tenant), o.Budget)
	if err != nil {
		return nil, err
	}
	o.Budget = b
	o.Supervision = messages.Merge(e.cfg.Supervision, o.Supervision)
	m, err := e.cfg.Models(o.Scenario)
	if err != nil {
		return nil, fmt.Errorf("%w: model: %v", ErrInvalidRequest, err)
	}
	if o.TraceID == "" { // the request continued no trace
		o.TraceID = e.newTraceID()
	}
	return newRunSpec(messages.RunID(e.cfg.NewID().String()), o, m), nil
}

// newTraceID is a new run's trace id when the engine traces, else "".
func (e *Engine) newTraceID() string {
	if e.cfg.Tracer == nil {
		return ""
	}
	id := e.cfg.NewID() // 16 bytes: a trace id's size
	return hex.EncodeToString(id[:])
}

// checkCalls refuses a scenario whose calls name a tool the engine lacks
// (the runtime's own tools are not for scripted calls either).
func (e *Engine) checkCalls(calls []string) error {
	for i, name := range calls {
		if _, _, ok := e.cfg.Tools.Lookup(name); !ok {
			return &messages.FieldError{Field: fmt.Sprintf("scenario.calls[%d]", i),
				Problem: fmt.Sprintf("names tool %q, which this engine does not have (its tools: %s)", name, listNames(e.cfg.Tools.Names(), 20))}
		}
	}
	return nil
}

// listNames joins at most max names, saying how many more there are.
func listNames(names []string, max int) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}

// runDefaults are the engine's defaults for what a StartRun leaves out.
func (e *Engine) runDefaults() messages.RunDefaults {
	return messages.RunDefaults{Concurrency: e.cfg.Concurrency, ApprovalTimeout: e.cfg.InterruptTimeout}
}

// Subscribe attaches a consumer to a session: it receives every event with
// seq > cmd.After exactly once and in order, first replayed from the
// journal, then live. Close the subscription when done. A subscription made
// while the engine shuts down is still closed by it (after delivering
// everything); once the hubs are stopping it fails with ErrShuttingDown.
func (e *Engine) Subscribe(ctx context.Context, cmd messages.Subscribe) (*Subscription, error) {
	if e.cfg.Followers != nil {
		return e.follow(ctx, cmd)
	}
	res, err := e.request(ctx, &subscribeReq{key: sessKey{tenantOr(cmd.Tenant), cmd.SessionID}, after: cmd.After, queue: e.cfg.SubscriberQueue})
	if err != nil {
		return nil, err
	}
	att := res.(*attached)
	return &Subscription{feed: att.feed, hub: att.hub, root: e.system.Root}, nil
}

func tenantOr(t messages.TenantID) messages.TenantID {
	if t == "" {
		return messages.LocalTenant
	}
	return t
}

// Head returns the last seq of a session owned by tenant.
func (e *Engine) Head(ctx context.Context, tenant messages.TenantID, session messages.SessionID) (uint64, error) {
	res, err := e.request(ctx, &sessionReq{key: sessKey{tenantOr(tenant), session}})
	if err != nil {
		return 0, err
	}
	return uint64(res.(sessionHead)), nil
}

// Publish injects an event into an existing session as if an agent of
// emit.RunID had produced it: stamped, journaled and fanned out like any
// other. It is for simulations and benchmarks; agents publish through
// their hub directly.
func (e *Engine) Publish(ctx context.Context, tenant messages.TenantID, session messages.SessionID, emit *messages.Emit) error {
	_, err := e.request(ctx, &publishReq{key: sessKey{tenantOr(tenant), session}, emit: emit})
	return err
}

// ErrRunNotEnded is returned by Rewind for a run that has not ended.
var ErrRunNotEnded = errors.New("actors: run has not ended")

// Rewind re-runs an ended run from a wave, as a new run in the same
// session (a run keeps its one terminal event): the new run reuses the
// source run's plan and the outputs of the nodes of earlier waves, and the
// note is given to every node that runs again. Its events get new seqs.
func (e *Engine) Rewind(ctx context.Context, cmd messages.Rewind) (RunRef, error) {
	if e.closing.Load() {
		return RunRef{}, ErrShuttingDown
	}
	tenant := tenantOr(cmd.Tenant)
	sum, err := e.Run(tenant, cmd.RunID)
	if err != nil {
		return RunRef{}, err
	}
	if !sum.Status.Terminal() {
		return RunRef{}, fmt.Errorf("%w: %s is %s", ErrRunNotEnded, cmd.RunID, sum.Status)
	}
	if len(cmd.Note) > messages.MaxQuestionBytes {
		return RunRef{}, fmt.Errorf("%w: note is longer than %d bytes", ErrInvalidRequest, messages.MaxQuestionBytes)
	}
	rs := runstate.New(cmd.RunID)
	info, _, err := e.catalog.Run(ctx, cmd.RunID) // found by Run: its events are in [FirstSeq, LastSeq]
	if err != nil {
		return RunRef{}, fmt.Errorf("actors: rewind: %w", err)
	}
	if err := e.scanRuns(ctx, info.Session, info.FirstSeq, info.LastSeq, map[messages.RunID]bool{cmd.RunID: true},
		func(env *messages.Envelope) bool { rs.Apply(env); return true }); err != nil {
		return RunRef{}, fmt.Errorf("actors: rewind: %w", err)
	}
	g := rs.Graph
	if g == nil || rs.Started == nil {
		return RunRef{}, fmt.Errorf("%w: run %s has no plan to rewind (or its start was trimmed by retention)", ErrInvalidRequest, cmd.RunID)
	}
	if cmd.Wave < 0 || cmd.Wave >= len(g.Waves) {
		return RunRef{}, fmt.Errorf("%w: wave must be in 0..%d", ErrInvalidRequest, len(g.Waves)-1)
	}
	var reused []messages.ReusedNode
	for i := range cmd.Wave {
		for _, id := range g.Waves[i] {
			n := g.Nodes[id]
			if n == nil || n.State != runstate.Completed {
				return RunRef{}, fmt.Errorf("%w: node %s of wave %d did not complete; rewind to wave %d or earlier", ErrInvalidRequest, id, i, i)
			}
			reused = append(reused, messages.ReusedNode{NodeID: id, Output: n.Output})
		}
	}
	m, err := e.cfg.Models(scenarioOf(rs.Started))
	if err != nil {
		return RunRef{}, err
	}
	spec := e.specOf(sessKey{tenant, sum.SessionID}, messages.RunID(e.cfg.NewID().String()), rs.Started, m)
	spec.traceParent, spec.traceID = "", e.newTraceID() // a new request: its own trace, not the source run's
	spec.rewind = &messages.RunRewoundPayload{From: cmd.RunID, Wave: cmd.Wave, Note: cmd.Note, Plan: g.Plan, Waves: g.Waves, Reused: reused}
	return e.start(ctx, spec)
}

// Resume answers an interrupt of res.Tenant. The parked agent receives the
// answer and carries on; the stream shows interrupt_resolved on its lane.
func (e *Engine) Resume(res messages.Resume) (messages.Interrupt, error) {
	res.Tenant = tenantOr(res.Tenant)
	return e.interrupts.Resolve(res)
}

// Interrupt returns an interrupt of tenant.
func (e *Engine) Interrupt(tenant messages.TenantID, id string) (messages.Interrupt, bool) {
	return e.interrupts.Get(tenantOr(tenant), id)
}

// PendingInterrupts lists the open interrupts of a session of tenant, in
// the order they were raised, after the interrupt id after, with the cursor
// of the next page ("" on the last). With no session it lists those of
// every session of tenant (interrupts.Registry.PendingAll: its own cursor
// form; a malformed one is ErrInvalidRequest).
func (e *Engine) PendingInterrupts(ctx context.Context, tenant messages.TenantID, session messages.SessionID, after string, limit int) ([]messages.Interrupt, string, error) {
	if session == "" { // every session of the tenant
		list, next, err := e.interrupts.PendingAll(tenantOr(tenant), after, limit)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		return list, next, nil
	}
	if _, err := e.request(ctx, &sessionReq{key: sessKey{tenantOr(tenant), session}}); err != nil {
		return nil, "", err
	}
	if err := e.Own(ctx, tenant, session); err != nil {
		return nil, "", err // cluster mode: its owner holds its interrupts
	}
	list, next := e.interrupts.Pending(tenantOr(tenant), session, after, limit)
	return list, next, nil
}

// RunsByStatus counts, for metrics, the live runs by status and the runs
// that ended since the engine started by terminal status.
func (e *Engine) RunsByStatus() map[messages.RunStatus]int { return e.index.Counts() }

// Abort stops a run. It still ends with exactly one terminal event:
// run_error with code "aborted". Aborting an ended run is ErrRunTerminal.
// It returns nil once the abort is journaled (run_abort_requested): from
// then on the run ends as aborted even if the process dies first.
func (e *Engine) Abort(ctx context.Context, cmd messages.AbortRun) error {
	reason := cmd.Reason
	if reason == "" {
		reason = "aborted by request"
	}
	if _, err := e.Run(cmd.Tenant, cmd.RunID); err != nil {
		return err // unknown, or another tenant's
	}
	rec := newAbortRecord(reason)
	if _, err := e.request(ctx, &stopRunReq{runID: cmd.RunID, msg: &messages.StopRun{Code: messages.ErrCodeAborted, Reason: reason}, abort: rec}); err != nil {
		return err
	}
	// Accepted: answered once its record is journaled, so that the abort
	// outlives a crash (recovery ends the run as aborted).
	select {
	case err := <-rec.ack:
		if err != nil {
			return fmt.Errorf("actors: the abort of %s was not journaled: %w", cmd.RunID, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: the abort of %s was not journaled in time: %w", cmd.RunID, ctx.Err())
	}
}

// Steer posts a steering note (or a graph diff) to a live run and returns
// its steering id. It is applied at the run's next wave boundary, or
// rejected there (steering_rejected) if it is invalid for the plan then.
// A note needs a model turn to become a diff; a diff is only checked for
// shape here. Steering an ended run is ErrRunTerminal.
func (e *Engine) Steer(ctx context.Context, cmd messages.Steer) (string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	switch {
	case cmd.Note == "" && cmd.Diff == nil:
		return "", bad("a note or a diff is required")
	case len(cmd.Note) > messages.MaxSteerNoteBytes:
		return "", bad("note is longer than %d bytes", messages.MaxSteerNoteBytes)
	}
	if cmd.Diff != nil {
		if err := cmd.Diff.Validate(); err != nil {
			return "", bad("%v", err)
		}
	}
	sum, err := e.Run(cmd.Tenant, cmd.RunID)
	if err != nil {
		return "", err // unknown, or another tenant's
	}
	if sum.Status.Terminal() {
		return "", fmt.Errorf("%w: %s", ErrRunTerminal, cmd.RunID)
	}
	id := e.cfg.NewID().String()
	_, err = e.request(ctx, &stopRunReq{runID: cmd.RunID, msg: &messages.Steering{ID: id, SteerNote: cmd.SteerNote}})
	if err != nil {
		return "", err
	}
	return id, nil
}

// limits returns tenant's quotas, defaults filled in.
func (e *Engine) limits(tenant messages.TenantID) Limits {
	if e.cfg.Limits == nil {
		return Limits{}.WithDefaults()
	}
	return e.cfg.Limits(tenant).WithDefaults()
}

// Stats are counters for metrics.
type Stats struct {
	// EventsPublished counts events acknowledged by the journal, all sessions.
	EventsPublished uint64
	// Hubs is the number of session hubs in memory (idle ones stop).
	Hubs int64
	// LiveRuns is the number of runs that have not ended, asleep or not.
	LiveRuns int64
	// AsleepRuns is the number of runs asleep: parked on humans, their
	// actors out of memory (Config.SleepAfter).
	AsleepRuns int64
	// IndexedRuns is the number of run summaries held in memory: live
	// runs, and ended runs until their summary is stored (runs.go).
	IndexedRuns int
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{EventsPublished: e.published.Load(), Hubs: e.hubCount.Load(), LiveRuns: e.runCount.Load(), AsleepRuns: e.asleepCount.Load(), IndexedRuns: e.index.Len()}
}

// PendingInterruptsByKind counts the interrupts waiting for a human, by kind
// (those of sleeping runs included).
func (e *Engine) PendingInterruptsByKind() map[messages.InterruptKind]int {
	return e.interrupts.PendingByKind()
}

// Done is closed when Shutdown has finished.
func (e *Engine) Done() <-chan struct{} { return e.done }

// Shutdown stops accepting runs, ends every live run with
// run_error{code:"interrupted"} (or freezes it, with KeepRunsOnShutdown),
// flushes the hubs, closes every
// subscription (after it has delivered everything) and waits for every
// goroutine the engine started. It is idempotent and returns ctx.Err() if
// ctx ends first.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.shutdownMu.Lock()
	defer e.shutdownMu.Unlock()
	if !e.closing.CompareAndSwap(false, true) {
		select {
		case <-e.done:
			return nil
		default:
		}
	}
	// The stages below are done once each: a call that returned ctx.Err()
	// part way is finished by the next call (shutStage, under shutdownMu).
	if e.shutStage < 1 {
		e.background.Close()
		select {
		case <-e.stopSweep:
		default:
			close(e.stopSweep)
		}
		if err := e.background.Wait(ctx); err != nil {
			return err
		}
		if _, err := e.request(ctx, &shutdownReq{}); err != nil {
			return err
		}
		e.shutStage = 1
	}
	if e.shutStage < 2 {
		e.turns.Close()
		if err := e.turns.Wait(ctx); err != nil {
			return err
		}
		// Tool calls still running are ended: their agents are stopping
		// (or frozen), and a call's result after this is lost, as in a crash.
		e.toolRuns.Close()
		e.toolCancel()
		if err := e.toolRuns.Wait(ctx); err != nil {
			return fmt.Errorf("actors: tool calls still running (a tool that ignores its context?): %w", err)
		}
		e.interrupts.Close() // frozen runs' interrupts: no timer may fire now
		e.reqMu.Lock()       // waits for requests in flight (the engine actor answers them)
		e.actorStopped = true
		e.reqMu.Unlock()
		if err := e.system.Root.StopFuture(e.root).Wait(); err != nil {
			return fmt.Errorf("actors: stop engine actor: %w", err)
		}
		e.shutStage = 2
	}
	// Every hub has flushed: store the summaries of the runs that ended.
	e.summaries.close()
	if err := e.store.Wait(ctx); err != nil {
		return err
	}
	e.system.Shutdown()
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	return nil
}

// Subscription is one consumer of a session's events.
type Subscription struct {
	feed     *feed.Subscription
	hub      *actor.PID
	root     *actor.RootContext
	unfollow func() // instead of hub and root in cluster mode (Config.Followers)
	closed   atomic.Bool
}

// Next appends to dst[:0] the next events (at most max), waiting for at
// least one. It returns feed.ErrClosed once the engine shut down and every
// event was delivered.
func (s *Subscription) Next(ctx context.Context, dst []*messages.Encoded, max int) ([]*messages.Encoded, error) {
	return s.feed.Next(ctx, dst, max)
}

// Cursor is the last seq delivered.
func (s *Subscription) Cursor() uint64 { return s.feed.Cursor() }

// Dropped counts events that overflowed the live queue and were read from the journal instead.
func (s *Subscription) Dropped() uint64 { return s.feed.Dropped() }

// Lag is how many acknowledged events the subscriber has not read yet.
func (s *Subscription) Lag() uint64 { return s.feed.Lag() }

// OnReady registers fn, called (on a hub goroutine, so it must not block)
// whenever events may be available or the subscription closed; see Poll.
func (s *Subscription) OnReady(fn func()) { s.feed.OnReady(fn) }

// Poll is Next without waiting: it may return nothing.
func (s *Subscription) Poll(ctx context.Context, dst []*messages.Encoded, max int) ([]*messages.Encoded, error) {
	return s.feed.Poll(ctx, dst, max)
}

// Close detaches the subscription from its hub. It is idempotent.
func (s *Subscription) Close() {
	// Not a sync.Once: closing wakes the consumer, whose OnReady callback
	// may itself call Close (a transport stream ending during shutdown);
	// a re-entrant call must return, not wait for the first.
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	if s.unfollow != nil {
		s.unfollow()
		return
	}
	// A hub that stopped closed its subscriptions first; telling it would
	// only make a dead letter.
	if s.feed.Close(nil) {
		s.root.Send(s.hub, &hubUnsubscribe{sub: s.feed})
	}
}
