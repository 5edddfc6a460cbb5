package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/transport"
)

// serveShutdownGrace bounds a graceful shutdown after SIGINT/SIGTERM.
const serveShutdownGrace = 30 * time.Second

type serveCmd struct {
	app        *app
	addr       string
	tokensFile string
	origins    []string
	heartbeat  time.Duration
	flushDelay time.Duration
	logLevel   string
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
from CONCLAVE_TOKENS ("tenant:token,tenant:token").`,
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
	return cmd
}

func (c *serveCmd) run(ctx context.Context) error {
	level, err := parseLevel(c.logLevel)
	if err != nil {
		return usageError(err)
	}
	if c.heartbeat < 100*time.Millisecond {
		return usageError(fmt.Errorf("--heartbeat must be at least 100ms, got %v", c.heartbeat))
	}
	if c.flushDelay < 0 || c.flushDelay > time.Second {
		return usageError(fmt.Errorf("--flush-delay must be in 0..1s, got %v", c.flushDelay))
	}
	logger := slog.New(slog.NewTextHandler(c.app.stderr, &slog.HandlerOptions{Level: level}))
	tokens, err := transport.LoadTokens(c.tokensFile, os.Getenv("CONCLAVE_TOKENS"))
	if err != nil {
		return usageError(err)
	}

	engine, err := actors.New(actors.Config{Logger: logger})
	if err != nil {
		return failure(err)
	}
	srv, err := transport.New(transport.Config{
		Engine: engine, Tokens: tokens, Logger: logger, Heartbeat: c.heartbeat,
		FlushDelay: c.flushDelay, AllowedOrigins: c.origins,
	})
	if err != nil {
		_ = engine.Shutdown(context.Background())
		return failure(err)
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
	logger.Info("conclave listening", "addr", l.Addr().String(), "url", "http://"+l.Addr().String())
	if c.ready != nil {
		c.ready(l.Addr().String())
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served: // the listener failed
		_ = engine.Shutdown(context.Background())
		_ = srv.Shutdown(context.Background())
		return failure(fmt.Errorf("serve: %w", err))
	case <-ctx.Done():
	}

	logger.Info("shutting down: ending live runs, closing streams")
	sctx, cancel := context.WithTimeout(context.Background(), serveShutdownGrace)
	defer cancel()
	// The engine first: live runs end with run_error{code:"interrupted"}
	// and every stream delivers it before its final frame.
	eerr := engine.Shutdown(sctx)
	serr := srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) && serr == nil {
		serr = err
	}
	if err := errors.Join(eerr, serr); err != nil {
		return failure(fmt.Errorf("shutdown: %w", err))
	}
	logger.Info("stopped")
	return nil
}
