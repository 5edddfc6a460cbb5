package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/billing"
	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/internal/redact"
	"github.com/conclave-ai/conclave/internal/runlog"
	"github.com/conclave-ai/conclave/internal/runmetrics"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/tool/fetch"
	"github.com/conclave-ai/conclave/transport"
	"github.com/conclave-ai/conclave/web"
)

// serveShutdownGrace bounds a graceful shutdown after SIGINT/SIGTERM.
const serveShutdownGrace = 30 * time.Second

type serveCmd struct {
	app        *app
	tracing    tracingFlags // serve_tracing.go
	addr       string
	tokensFile string
	origins    []string
	heartbeat  time.Duration
	flushDelay time.Duration
	logLevel   string
	logFormat  string // --log-format: text (default) or json
	dataDir    string
	governance string // --governance: the approvers and policy file
	serverKey  string // --server-key: the key that signs the audit log
	memory     bool
	retainAge  time.Duration
	retainN    uint64
	retainTick time.Duration
	limits     serveLimits
	quotas     serveQuotas
	tools      toolFlags
	remote     remoteAgentFlags
	repair     bool
	// failGrace: after the journal fails, how long the server stays up,
	// not ready, before it stops (a load balancer's readiness period).
	failGrace time.Duration
	// journalIdleAfter: a session unused this long leaves the journal's
	// memory (journal.Options.IdleAfter).
	journalIdleAfter time.Duration
	// journalMemtable is the journal's memtable size in MiB (its WAL file
	// is preallocated at about 1.1 times it).
	journalMemtable int
	model           modelFlags
	cluster         clusterFlags
	// fileURLs are the prefixes runs' files may be fetched from
	// (--allow-file-url), fileURLAddrs the private addresses those
	// fetches may reach (--allow-file-url-addr).
	fileURLs, fileURLAddrs []string
	// supervision is --supervision: the server's per-role supervision
	// (messages.ParseSupervision).
	supervision string
	// billingURL, billingFail and billingTimeout are the billing
	// pre-flight hook (package billing): --billing-url, --billing-fail
	// open|closed, --billing-timeout.
	billingURL     string
	billingFail    string
	billingTimeout time.Duration
	// ready, when set (tests), receives the listening address.
	ready func(addr string)
}

func newServeCmd(a *app) *cobra.Command {
	c := &serveCmd{app: a}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API with SSE and WebSocket event streams",
		Long: `Serve the runs API, the SSE and WebSocket event streams and /metrics.

Without tokens the server only listens on loopback and every caller is tenant
"local". Tokens come from --tokens FILE ({"tokens":{"<token>":"<tenant>"}}) and
from CONCLAVE_TOKENS ("tenant:token,tenant:token").

Agents run on the scripted model unless --model openai points them at an
OpenAI-compatible server (--model-url, --model-name, --role-model; the key from
CONCLAVE_MODEL_API_KEY or OPENAI_API_KEY).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address host:port (port 0 picks a free port)")
	fs.StringVar(&c.tokensFile, "tokens", "", "JSON file mapping bearer tokens to tenants")
	fs.StringArrayVar(&c.origins, "allowed-origin", nil, "browser origin allowed to open WebSockets and call the API cross-origin (repeatable; * for any)")
	fs.DurationVar(&c.heartbeat, "heartbeat", 10*time.Second, "interval of SSE heartbeats and WebSocket pings on idle streams")
	fs.DurationVar(&c.flushDelay, "flush-delay", transport.DefaultFlushDelay, "how long a woken stream waits so more events share one write")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level on stderr: debug|info|warn|error")
	registerLogFormat(fs, &c.logFormat)
	fs.StringVar(&c.dataDir, "data", "./data", "data directory of the durable journal (created if missing)")
	fs.StringVar(&c.governance, "governance", "", "JSON `file` of approvers' public keys and the m-of-n signature policy per tenant (docs/governance.md)")
	fs.StringVar(&c.serverKey, "server-key", "", "the server's ML-DSA-65 private key `file` that signs the audit log (created with its .pub beside it if missing; default DATA/server.key, or a key that lives only in memory with --memory)")
	fs.BoolVar(&c.memory, "memory", false, "keep events in memory only (nothing survives a restart); --data is ignored")
	fs.DurationVar(&c.retainAge, "retention-age", 0, "drop a session's events older than this (0: keep)")
	fs.Uint64Var(&c.retainN, "retention-events", 0, "keep at most this many events per session (0: no limit)")
	fs.DurationVar(&c.retainTick, "retention-interval", time.Minute, "how often retention trims the sessions")
	fs.IntVar(&c.journalMemtable, "journal-memtable-mib", 64, "the journal's memtable size in MiB: its write-ahead log file is preallocated at about 1.1 times it, so a fresh data directory takes that much disk (4 is plenty for a small deployment; up to four memtables may be in memory)")
	fs.DurationVar(&c.journalIdleAfter, "journal-idle-after", journal.DefaultIdleAfter, "a session without a live run that nobody wrote or read for this long leaves the journal's memory (it is read from disk on its next use; -1s: never)")
	fs.DurationVar(&c.failGrace, "fail-grace", 5*time.Second, "when the journal fails (the data directory removed, a failing disk), how long the server stays up answering GET /readyz 503 before it stops and exits 1")
	c.tracing.register(fs)
	fs.StringVar(&c.supervision, "supervision", "", "how failing agents are supervised, per role (director, worker, subagent, debater, team), for runs that do not choose: "+
		"`ROLE=STRATEGY[:LIMIT[/WINDOW]][@BACKOFF],...` with STRATEGY one-for-one (or restart), all-for-one or stop (docs/supervision.md)")
	fs.StringVar(&c.billingURL, "billing-url", "", "billing pre-flight hook: before each run and each model turn, POST {stage, tenant, run_id, agent, spent_tokens, spent_usd, estimated_usd} "+
		"to this URL and expect {\"allow\": bool, \"code\": \"insufficient_budget|tenant_suspended\", \"reason\": \"...\"} (docs/api.md#billing-pre-flight)")
	fs.StringVar(&c.billingFail, "billing-fail", "closed", "what a billing check that fails or times out means: open (allow) or closed (deny with insufficient_budget)")
	fs.DurationVar(&c.billingTimeout, "billing-timeout", billing.DefaultTimeout, "how long one billing check may take")
	fs.BoolVar(&c.repair, "repair", false, "start even if the journal lost or garbled acknowledged events: truncate each damaged session to its last intact event (logged), never reusing a seq")
	c.cluster.register(fs)
	c.limits.flags(fs)
	c.quotas.flags(fs)
	c.model.register(fs)
	c.tools.register(fs)
	fs.StringArrayVar(&c.fileURLs, "allow-file-url", nil, "let runs attach files by URL from under this `PREFIX` (an http or https URL; repeatable): the server fetches them before the run starts (loopback, private and link-local addresses refused)")
	fs.StringArrayVar(&c.fileURLAddrs, "allow-file-url-addr", nil, "let --allow-file-url fetches connect to exactly this `IP:PORT` even though it is private or local (repeatable)")
	c.remote.register(fs)
	return cmd
}

// fileFetcher is the fetcher of runs' files by URL the flags ask for (nil
// without --allow-file-url).
func (c *serveCmd) fileFetcher() (*fetch.Files, error) {
	if len(c.fileURLs) == 0 {
		if len(c.fileURLAddrs) > 0 {
			return nil, errors.New("--allow-file-url-addr needs --allow-file-url")
		}
		return nil, nil
	}
	cfg := fetch.FilesConfig{Prefixes: c.fileURLs}
	for _, v := range c.fileURLAddrs {
		ap, err := netip.ParseAddrPort(v)
		if err != nil {
			return nil, fmt.Errorf("invalid --allow-file-url-addr %q: want IP:PORT", truncateFlag(v))
		}
		cfg.Allow = append(cfg.Allow, ap)
	}
	f, err := fetch.NewFiles(cfg)
	if err != nil {
		return nil, fmt.Errorf("--allow-file-url: %w", err)
	}
	return f, nil
}

// billingGate is the billing hook of --billing-url (nil without one).
func (c *serveCmd) billingGate() (*billing.Gate, error) {
	var failOpen bool
	switch c.billingFail {
	case "open":
		failOpen = true
	case "closed", "": // "": a serveCmd built without its flags (tests)
	default:
		return nil, fmt.Errorf("invalid --billing-fail %q: must be open or closed", c.billingFail)
	}
	if c.billingURL == "" {
		return nil, nil
	}
	u, err := url.Parse(c.billingURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid --billing-url %q: must be an http or https URL", c.billingURL)
	}
	if c.billingTimeout <= 0 || c.billingTimeout > time.Minute {
		return nil, fmt.Errorf("invalid --billing-timeout %v: must be in (0, 1m]", c.billingTimeout)
	}
	return &billing.Gate{Checker: &billing.HTTPChecker{URL: c.billingURL, Timeout: c.billingTimeout}, FailOpen: failOpen}, nil
}

func (c *serveCmd) run(ctx context.Context) (err error) {
	logH, err := logHandler(c.app.stderr, c.logLevel, c.logFormat)
	if err != nil {
		return usageError(err)
	}
	if c.heartbeat < 100*time.Millisecond {
		return usageError(fmt.Errorf("--heartbeat must be at least 100ms, got %v", c.heartbeat))
	}
	if c.retainTick < 0 || (c.retainTick > 0 && c.retainTick < 10*time.Millisecond) {
		return usageError(fmt.Errorf("--retention-interval must be at least 10ms, got %v", c.retainTick))
	}
	if c.flushDelay < 0 || c.flushDelay > time.Second {
		return usageError(fmt.Errorf("--flush-delay must be in 0..1s, got %v", c.flushDelay))
	}
	if err := c.limits.check(); err != nil {
		return usageError(err)
	}
	if _, err := c.remote.parse(); err != nil {
		return usageError(err)
	}
	gate, err := c.billingGate()
	if err != nil {
		return usageError(err)
	}
	var supervision *messages.Supervision
	if c.supervision != "" {
		if supervision, err = messages.ParseSupervision(c.supervision); err != nil {
			return usageError(fmt.Errorf("invalid --supervision: %w", err))
		}
	}
	tenantLimits, tenantStreams, err := c.quotas.load()
	if err != nil {
		return usageError(err)
	}
	logger := slog.New(logH)
	tokens, err := transport.LoadTokens(c.tokensFile, os.Getenv("CONCLAVE_TOKENS"))
	if err != nil {
		return usageError(err)
	}

	if tokens.Len() == 0 && !transport.IsLoopback(c.addr) { // refuse before touching the disk
		return usageError(fmt.Errorf("%w: %s", transport.ErrInsecureBind, c.addr))
	}
	// Secrets are masked in every log line, event and tool result.
	secretValues := append(secrets(c.app.env, tokens, &c.tools), c.remote.secretValues(c.app.env)...)
	logger = slog.New(redact.New(secretValues...).Handler(logger.Handler()))
	// A run's start and end lines (internal/runlog), and its trace id on
	// every line that names the run.
	runLog := runlog.New(runlog.Config{Logger: logger})
	logger = slog.New(runLog.Handler(logger.Handler()))
	ecfg := actors.Config{Logger: logger, Limits: tenantLimits, HubIdleAfter: c.quotas.hubIdleAfter, SleepAfter: c.quotas.sleepAfter,
		Secrets: secretValues}
	ecfg.Supervision, ecfg.Billing = supervision, gate
	if err := c.model.bounds(&ecfg); err != nil {
		return usageError(err)
	}
	files, err := c.fileFetcher()
	if err != nil {
		return usageError(err)
	}
	if files != nil {
		ecfg.FileFetcher = files
		defer files.Close()
		logger.Info("runs may attach files by URL", "prefixes", c.fileURLs)
	}
	var closeModel func()
	if ecfg.Models, closeModel, err = c.model.factory(c.app.env, logger); err != nil {
		return usageError(err)
	}
	defer closeModel() // after the engine's shutdown (deferred later, run first)
	if ecfg.Prices, err = c.quotas.prices(); err != nil {
		return usageError(err)
	}
	if err := c.quotas.checkPrices(ecfg.Prices, c.model.modelNames()); err != nil {
		return usageError(err)
	}
	// The MCP servers start before the journal opens (a server that
	// cannot start leaves nothing behind) and stop after the engine.
	if !c.memory {
		c.tools.defaultWorkspaceDir = filepath.Join(c.dataDir, "workspaces")
	}
	tools, mcpServers, err := c.tools.engineTools(ctx, logger, ecfg.Models == nil)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopTools(mcpServers, logger); serr != nil && err == nil {
			err = failure(serr)
		}
	}()
	ecfg.Tools = tools
	if ecfg.Remote, err = c.remote.registry(ctx, c.app.env, logger); err != nil {
		return usageError(err)
	}
	tracer, err := c.tracing.start(ctx, c.app.env, logger, tools)
	if err != nil {
		return err
	}
	if tracer != nil {
		ecfg.Tracer = tracer
		defer shutdownTracer(tracer, logger) // after the engine's shutdown: its last events are spans too
	}
	if c.governance != "" {
		if ecfg.Governance, err = governance.LoadConfig(c.governance); err != nil {
			return usageError(fmt.Errorf("--governance: %w", err))
		}
		logger.Info("governance policy loaded", "file", c.governance, "tenants", len(ecfg.Governance.Tenants))
	}
	// What SIGTERM does to live runs depends on the journal.
	stopping := "shutting down: ending live runs with run_error interrupted (the in-memory journal keeps nothing), closing streams"
	var member *clusterMember
	var durable *journal.Durable // nil unless the durable journal
	switch {
	case c.cluster.enabled():
		if member, err = c.cluster.join(ctx, logger); err != nil {
			return failure(err)
		}
		defer member.close(logger, &err) // after the journal's Close (defers run in reverse)
		// Runs outlive the node: Shutdown freezes them, and the node
		// leaves, so another one takes its sessions over at once.
		ecfg.Journal, ecfg.KeepRunsOnShutdown = member.journal, true
		ecfg.Placement, ecfg.Followers = member.node, member.followers
		stopping = "shutting down: freezing live runs in the journal and leaving the cluster (another node takes them over), closing streams"
	case !c.memory:
		dir := filepath.Join(c.dataDir, "journal")
		if c.journalMemtable < 0 || c.journalMemtable > 1024 {
			return usageError(fmt.Errorf("--journal-memtable-mib must be in 1..1024, got %d", c.journalMemtable))
		}
		// 0 (a serveCmd built without its flags): the journal's default.
		durable, err = journal.Open(dir, journal.Options{Logger: logger, Repair: c.repair, IdleAfter: c.journalIdleAfter, MemTableSize: uint64(c.journalMemtable) << 20})
		switch {
		case errors.Is(err, journal.ErrLocked):
			return failure(fmt.Errorf("data directory %s is in use by another conclave server", c.dataDir))
		case err != nil:
			return failure(fmt.Errorf("open the journal: %w", err))
		}
		// Runs outlive the process: Shutdown freezes them and the next
		// start resumes them (parked ones still parked).
		ecfg.Journal, ecfg.KeepRunsOnShutdown = durable, true
		stopping = "shutting down: freezing live runs in the journal (the next start resumes them), closing streams"
		logger.Info("durable journal", "dir", dir)
	default:
		ecfg.Journal = journal.NewMemory()
		logger.Warn("in-memory journal: events and runs do not survive a restart")
	}
	// Closed last (defers run in reverse): after the engine and the
	// server, so streams still catching up from the journal drain first.
	defer closeJournal(ecfg.Journal, logger, &err)
	auditLog, err := c.openAudit(logger)
	if err != nil {
		return err
	}
	// Closed after the engine, whose hubs record their last batches.
	defer func() {
		if cerr := auditLog.Close(); cerr != nil {
			logger.Error("close the audit log", "err", cerr)
			if err == nil {
				err = failure(fmt.Errorf("close the audit log: %w", cerr))
			}
		}
	}()
	// Before any hub runs: the decisions journaled by a process that died
	// before its audit log's fsync are recorded now (audit.Log.CatchUp).
	// Not in a cluster: a node's audit log records what it journaled, and
	// the shared journal holds every node's sessions.
	if member == nil {
		if n, err := auditLog.CatchUp(ctx, ecfg.Journal); err != nil {
			return failure(fmt.Errorf("audit log: catch up with the journal: %w", err))
		} else if n > 0 {
			logger.Warn("audit log caught up with the journal after an unclean stop", "sessions", n)
		}
	}
	ecfg.Audit = auditLog
	// Metrics of runs come from their events (internal/runmetrics).
	runMetrics := runmetrics.New(runmetrics.Config{})
	ecfg.Observers = append(ecfg.Observers, runMetrics, runLog)
	engine, err := actors.New(ecfg)
	if err != nil {
		return failure(err)
	}
	tcfg := transport.Config{
		Engine: engine, Audit: auditLog, Tokens: tokens, Logger: logger, Heartbeat: c.heartbeat,
		FlushDelay: c.flushDelay, AllowedOrigins: c.origins,
		Dashboard: web.Handler(transport.NotFound()),
	}
	if mcpServers != nil && mcpServers.servers != nil {
		tcfg.ToolServers = func() []messages.ToolServer { return toolServers(mcpServers.servers) }
	}
	c.limits.apply(&tcfg)
	tcfg.StreamLimit = tenantStreams
	var journalFailed <-chan struct{} // nil (never) without the durable journal
	if durable != nil {
		journalFailed = durable.Failed()
	}
	tcfg.Ready = func() []messages.NotReady {
		var not []messages.NotReady
		if durable != nil {
			if err := durable.Err(); err != nil {
				not = append(not, messages.NotReady{Component: "journal", Reason: err.Error()})
			}
		}
		not = append(not, c.model.notReady()...)
		if tcfg.ToolServers != nil {
			for _, sv := range tcfg.ToolServers() {
				if !sv.Up {
					not = append(not, messages.NotReady{Component: "mcp server " + sv.Name, Reason: sv.Down})
				}
			}
		}
		return not
	}
	reg := prometheus.NewRegistry() // the server's metrics, the runs', the model's and the cluster's, on one /metrics
	reg.MustRegister(runMetrics)
	if m := c.model.openaiModel; m != nil {
		reg.MustRegister(newModelCollector(m))
	}
	reg.MustRegister(newCostCollector(engine))
	if member != nil {
		member.node.OnAdopt(engine.Adopt)
		tcfg.Wrap = member.forwarder.Handler
		reg.MustRegister(member.node.Collector(member.forwarder))
	}
	tcfg.Registry = reg
	srv, err := transport.New(tcfg)
	if err != nil {
		_ = engine.Shutdown(context.Background())
		return failure(err)
	}
	if member != nil {
		if err := member.forwarder.Serve(srv.Inner()); err != nil {
			_ = engine.Shutdown(context.Background())
			return failure(err)
		}
	}
	l, err := srv.Listen(c.addr)
	if err != nil {
		_ = engine.Shutdown(context.Background())
		_ = srv.Shutdown(context.Background())
		if errors.Is(err, transport.ErrInsecureBind) {
			return usageError(err)
		}
		return failure(fmt.Errorf("listen on %s: %w", c.addr, err))
	}
	if tokens.Len() == 0 {
		logger.Warn("no tokens configured: authentication is off, every caller is tenant \"local\", listening on loopback only")
	} else {
		logger.Info("bearer-token authentication on", "tokens", tokens.Len())
	}
	if member != nil {
		if err := member.publishURL(ctx, c.cluster.advertise, l.Addr()); err != nil {
			_ = engine.Shutdown(context.Background())
			_ = srv.Shutdown(context.Background())
			return failure(fmt.Errorf("cluster: %w", err))
		}
	}
	logger.Info("conclave listening", "addr", l.Addr().String(), "url", "http://"+l.Addr().String())
	if c.ready != nil {
		c.ready(l.Addr().String())
	}

	var failedErr error // the journal's failure, when it made the server stop
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	stopRetention := c.retention(ecfg.Journal, logger)
	defer stopRetention()
	select {
	case err := <-served: // the listener failed
		_ = engine.Shutdown(context.Background())
		_ = srv.Shutdown(context.Background())
		return failure(fmt.Errorf("serve: %w", err))
	case <-member.lost():
		// Fail-stop: other nodes may own this node's sessions now. Freeze
		// everything (nothing more is written) and exit non-zero, so a
		// supervisor starts a new member.
		sctx, cancel := context.WithTimeout(context.Background(), serveShutdownGrace)
		defer cancel()
		_ = engine.Shutdown(sctx)
		_ = member.followers.Shutdown(sctx)
		_ = member.forwarder.Shutdown(sctx)
		_ = srv.Shutdown(sctx)
		return failure(cluster.ErrLost)
	case <-journalFailed:
		// Nothing can be journaled any more: hubs that try end their
		// streams with a session_gone frame. Stay up, not ready, so that a
		// load balancer sees /readyz fail, then stop and exit 1.
		failedErr = durable.Err()
		logger.Error("the journal failed: the server is not ready and stops (restart it once the data directory is back)",
			"dir", durable.Dir(), "err", failedErr, "stop_in", c.failGrace)
		grace := time.NewTimer(c.failGrace)
		select {
		case <-grace.C:
		case <-ctx.Done():
		}
		grace.Stop()
		stopping = "shutting down after the journal failed: closing streams"
	case <-ctx.Done():
	}

	logger.Info(stopping)
	sctx, cancel := context.WithTimeout(context.Background(), serveShutdownGrace)
	defer cancel()
	// The engine first: live runs are frozen (durable journal) or end with
	// run_error{code:"interrupted"} (memory), and every stream delivers
	// what was journaled before its final frame.
	eerr := engine.Shutdown(sctx)
	if member != nil {
		// The streams follow the journal, not the engine: they end now,
		// once they delivered what was journaled. Forwarded calls finish,
		// and the node leaves last (member.close).
		eerr = errors.Join(eerr, member.followers.Shutdown(sctx), member.forwarder.Shutdown(sctx))
	}
	serr := srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) && serr == nil {
		serr = err
	}
	if err := errors.Join(eerr, serr); err != nil && failedErr == nil {
		return failure(fmt.Errorf("shutdown: %w", err))
	}
	if failedErr != nil {
		return failure(fmt.Errorf("stopped: the journal failed: %w", failedErr))
	}
	logger.Info("stopped")
	return nil
}

// closeJournal closes j and, if that fails, logs it and makes the command
// fail (unless it already failed): a journal that could not be closed may
// not have written everything it acknowledged to its own records.
func closeJournal(j journal.Journal, logger *slog.Logger, err *error) {
	cerr := j.Close()
	if cerr == nil {
		return
	}
	logger.Error("close the journal", "err", cerr)
	if *err == nil {
		*err = failure(fmt.Errorf("close the journal: %w", cerr))
	}
}

// retention trims every session's history per --retention-age and
// --retention-events every --retention-interval, on a goroutine the
// returned func stops.
func (c *serveCmd) retention(j journal.Journal, logger *slog.Logger) (stop func()) {
	r := journal.Retention{MaxAge: c.retainAge, MaxEvents: c.retainN}
	if j == nil || (r.MaxAge == 0 && r.MaxEvents == 0) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := c.retainTick
		if every <= 0 {
			every = time.Minute // a serveCmd built without flags (tests)
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sessions, err := j.Sessions(ctx)
			for _, s := range sessions {
				if n, err := journal.ApplyRetention(ctx, j, s, r, c.app.now()); err != nil {
					logger.Error("retention", "session", s, "err", err)
				} else if n > 0 {
					logger.Info("retention trimmed events", "session", s, "events", n)
				}
			}
			if err != nil && ctx.Err() == nil {
				logger.Error("retention: list sessions", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

var _ actors.Auditor = (*audit.Log)(nil)

// openAudit opens the audit log: DATA/audit signed by DATA/server.key (or
// --server-key), created on the first start; with --memory, in memory,
// signed by --server-key or by a key that lives as long as the process.
func (c *serveCmd) openAudit(logger *slog.Logger) (*audit.Log, error) {
	keyPath := c.serverKey
	if keyPath == "" && !c.memory {
		keyPath = filepath.Join(c.dataDir, "server.key")
	}
	var key *governance.PrivateKey
	var err error
	if keyPath != "" {
		key, err = governance.LoadOrCreateServerKey(keyPath)
		if err != nil {
			return nil, failure(fmt.Errorf("the server key: %w", err))
		}
		logger.Info("audit log signing key", "key", keyPath, "public_key", keyPath+".pub")
	} else {
		if _, key, _, err = governance.GenerateKey(nil); err != nil {
			return nil, failure(err)
		}
		logger.Warn("audit log in memory, signed by a key that lives only in memory: give --server-key to verify its exports")
	}
	dir := ""
	if !c.memory {
		dir = filepath.Join(c.dataDir, "audit")
	}
	l, err := audit.Open(audit.Config{Dir: dir, Key: key, Logger: logger, Now: c.app.now})
	if err != nil {
		return nil, failure(fmt.Errorf("open the audit log: %w", err))
	}
	if dir != "" {
		logger.Info("audit log", "dir", dir)
	}
	return l, nil
}
