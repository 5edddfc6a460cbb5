package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/tool"
)

// server is one MCP server: its supervisor keeps it connected, and its
// tools call it over the live connection.
type server struct {
	s      *Servers
	spec   Spec
	name   string
	cfg    *Config
	log    *slog.Logger
	client *sdk.Client
	tools  []string // the remote names of the tools it offers (those adopted at Start)
	listed []string // every name it listed at Start, adopted or not: a restart compares with these

	// progress maps the progress tokens of this server's calls in flight
	// to them: a server can report only on its own calls.
	progress progressTokens

	// mu guards the fields below. It is never held across I/O, nor
	// while taking Servers.changeMu (notify is called after Unlock).
	mu       sync.Mutex
	live     *conn // nil while down
	down     error // why it is down
	restarts int
}

func newServer(s *Servers, sp Spec) *server {
	log := s.log.With("mcp_server", sp.Name)
	v := &server{
		s: s, spec: sp, name: sp.Name, cfg: &s.cfg, log: log,
		down: errors.New("not started"),
	}
	v.client = newClient(log, s.cfg.PingInterval, v.progress.notified)
	return v
}

// conn is one connection to the server: an MCP session and, for a stdio
// server, its process. life ends when the connection ends, its cause
// saying why; calls in flight end with it.
type conn struct {
	sess  *sdk.ClientSession
	proc  *process // stdio servers
	life  context.Context
	end   context.CancelCauseFunc
	since time.Time
	// watched is closed when the goroutine waiting on the session
	// returned.
	watched chan struct{}
}

// connect starts the process or reaches the URL, does the MCP handshake
// and lists the tools, within ConnectTimeout. On success the returned
// connection is watched: life ends when the session or the process does.
func (v *server) connect(ctx context.Context) (*conn, []*sdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.ConnectTimeout)
	defer cancel()
	var (
		tr sdk.Transport
		p  *process
	)
	switch {
	case v.spec.Transport != nil:
		tr = v.spec.Transport()
	case v.spec.URL != "":
		tr = &sdk.StreamableClientTransport{
			Endpoint:   v.spec.URL,
			HTTPClient: v.cfg.HTTPClient,
			// We restart the whole session ourselves (with our backoff):
			// the SDK's own reconnects would hide a dead server from us.
			MaxRetries: -1,
			// Conclave needs no server-initiated messages: no standing
			// GET stream per server.
			DisableStandaloneSSE: true,
			MaxEventSize:         v.cfg.MaxMessageBytes,
		}
	default:
		var err error
		env := append(slices.Clip(v.cfg.Env), v.spec.Env...) // a later entry of a name wins (exec.Cmd.Env)
		if p, err = startProcess(v.spec.Command, env, v.log, &v.s.group, v.cfg.Clock); err != nil {
			return nil, nil, err
		}
		tr = &sdk.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: v.cfg.MaxMessageBytes}
	}
	fail := func(err error) (*conn, []*sdk.Tool, error) {
		if p != nil {
			p.stop(v.s.hurry, v.cfg.StopGrace, v.cfg.Clock)
			if ctx.Err() == nil || errors.Is(err, sdk.ErrConnectionClosed) {
				err = fmt.Errorf("%w (%v)", err, p.exitError())
			}
		}
		return nil, nil, err
	}
	peek := &taskPeek{Transport: tr}
	sess, err := v.client.Connect(ctx, peek, nil)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	list, err := v.listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return fail(fmt.Errorf("list tools: %w", err))
	}
	list = slices.DeleteFunc(list, func(t *sdk.Tool) bool {
		if t != nil && peek.needsTasks(t.Name) {
			v.log.Warn("mcp tool not offered: it runs only as an MCP task (execution.taskSupport required), which Conclave does not implement", "tool", t.Name)
			return true
		}
		return false
	})
	life, end := context.WithCancelCause(context.Background())
	c := &conn{sess: sess, proc: p, life: life, end: end, since: v.cfg.Clock.Now(), watched: make(chan struct{})}
	if !v.s.group.Go(func() { v.watch(c) }) {
		close(c.watched)
		v.closeConn(c, ErrClosed)
		return nil, nil, ErrClosed
	}
	return c, list, nil
}

// watch ends c's life when its session ends (the server closed it, the
// transport failed, a ping failed) or its process exits.
func (v *server) watch(c *conn) {
	defer close(c.watched)
	ended := make(chan error, 1) // buffered: the waiter never blocks on it
	if !v.s.group.Go(func() { ended <- c.sess.Wait() }) {
		c.end(ErrClosed)
		return
	}
	var exited <-chan struct{}
	if c.proc != nil {
		exited = c.proc.exited
	}
	select {
	case err := <-ended:
		if c.proc != nil {
			// The stdout of a dying process ends first: give its exit
			// status a moment to be the cause, which says more.
			grace, stop := v.cfg.Clock.Timer(v.cfg.StopGrace)
			select {
			case <-exited:
				c.end(c.proc.exitError())
			case <-grace:
			case <-c.life.Done():
			}
			stop()
		}
		if err == nil {
			err = errors.New("closed by the server")
		}
		c.end(fmt.Errorf("connection ended: %w", err))
	case <-exited:
		c.end(c.proc.exitError())
		<-ended // closeConn closes the session
	case <-c.life.Done():
		<-ended
	}
}

// listTools lists the server's tools, page by page, at most MaxTools.
func (v *server) listTools(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Tool, error) {
	if ir := sess.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools == nil {
		v.log.Warn("mcp server offers no tools")
		return nil, nil
	}
	var out []*sdk.Tool
	cursor := ""
	for range v.cfg.MaxTools + 1 { // a page has at least one tool, or is the last
		res, err := sess.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Tools...)
		if len(out) > v.cfg.MaxTools {
			v.log.Warn("mcp server lists more tools than allowed; the rest are left out", "max_tools", v.cfg.MaxTools)
			return out[:v.cfg.MaxTools], nil
		}
		if res.NextCursor == "" || len(res.Tools) == 0 {
			break
		}
		cursor = res.NextCursor
	}
	return out, nil
}

// adopt makes agent tools of the tools the server listed at Start. A tool
// whose name does not fit tool names is renamed (bytes replaced, cut),
// with a warning; one whose name then collides, or whose schema a
// tool.Set refuses, is left out with a warning.
func (v *server) adopt(list []*sdk.Tool) []tool.Tool {
	var out []tool.Tool
	seen := map[string]bool{}
	v.listed = toolNames(list)
	for _, t := range list {
		if t == nil || t.Name == "" {
			v.log.Warn("mcp tool without a name left out")
			continue
		}
		name, changed := toolName(v.name, t.Name)
		if seen[name] {
			v.log.Warn("mcp tool left out: its name collides with another tool's", "tool", t.Name, "as", name)
			continue
		}
		schema, err := schemaOf(t)
		if err != nil {
			v.log.Warn("mcp tool left out", "tool", t.Name, "err", err)
			continue
		}
		rt := &remoteTool{srv: v, remote: t.Name, def: tool.Def{Name: name, Description: describe(t), Schema: schema, Risk: riskOf(t), DisplayName: v.displayName(t)}}
		if _, err := tool.NewSet(rt); err != nil {
			v.log.Warn("mcp tool left out", "tool", t.Name, "err", err)
			continue
		}
		if changed {
			v.log.Warn("mcp tool renamed to fit tool names", "tool", t.Name, "as", name)
		}
		seen[name] = true
		v.tools = append(v.tools, t.Name)
		out = append(out, rt)
	}
	return out
}

// displayName is how people see a tool with a title: "server: Title"
// ("" without one: tool.Set.DisplayName makes "server: tool").
func (v *server) displayName(t *sdk.Tool) string {
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	if title == "" {
		return ""
	}
	return v.name + ": " + cutAt(title, maxTitleBytes)
}

// maxTitleBytes bounds a tool's title in its display name.
const maxTitleBytes = 80

// supervise keeps the server connected until Shutdown: it waits for the
// connection to end, closes it, and connects again after the backoff.
func (v *server) supervise(c *conn) {
	ctx := v.s.ctx
	backoff := v.cfg.MinBackoff
	for {
		if c != nil {
			select {
			case <-c.life.Done():
			case <-ctx.Done():
				v.setDown(c, ErrClosed)
				v.closeConn(c, ErrClosed)
				return
			}
			cause := context.Cause(c.life)
			v.setDown(c, cause)
			v.log.Warn("mcp server down; restarting", "cause", cause, "in", backoff)
			v.closeConn(c, cause)
			if v.cfg.Clock.Now().Sub(c.since) >= v.cfg.MaxBackoff {
				backoff = v.cfg.MinBackoff
			}
			c = nil
		}
		wait, stop := v.cfg.Clock.Timer(backoff)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-wait:
		}
		backoff = min(2*backoff, v.cfg.MaxBackoff)
		nc, list, err := v.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			v.setFailed(err)
			v.log.Warn("mcp server restart failed", "err", err, "next_in", backoff)
			continue
		}
		if names := toolNames(list); !slices.Equal(names, v.listed) {
			v.log.Warn("mcp server restarted with other tools; the engine keeps the first list", "listed", names)
		}
		c = nc
		// Logged before the server is live again: whoever sees it up (a
		// status, a call) finds the restart in the log already.
		v.log.Info("mcp server restarted", "restarts", v.status().Restarts+1)
		v.setLive(c, true)
	}
}

func toolNames(list []*sdk.Tool) []string {
	var out []string
	for _, t := range list {
		if t != nil && t.Name != "" {
			out = append(out, t.Name)
		}
	}
	return out
}

// closeConn ends c: calls in flight fail with cause, the process (if any)
// is stopped, the session closed, and its watcher has returned.
func (v *server) closeConn(c *conn, cause error) {
	c.end(cause)
	if c.proc != nil {
		// First the process: once it is gone the session's reads and
		// writes fail, so closing the session cannot wait on it.
		c.proc.stop(v.s.hurry, v.cfg.StopGrace, v.cfg.Clock)
	}
	_ = c.sess.Close()
	<-c.watched
}

// setLive makes c the live connection; restart counts it as a restart.
func (v *server) setLive(c *conn, restart bool) {
	v.mu.Lock()
	v.live, v.down = c, nil
	if restart {
		v.restarts++
	}
	v.mu.Unlock()
	v.s.notify()
}

func (v *server) setDown(c *conn, cause error) {
	v.mu.Lock()
	if v.live == c {
		v.live, v.down = nil, cause
	}
	v.mu.Unlock()
	v.s.notify()
}

func (v *server) setFailed(err error) {
	v.mu.Lock()
	v.down = err
	v.mu.Unlock()
	v.s.notify()
}

func (v *server) status() Status {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := Status{Name: v.name, Up: v.live != nil, Restarts: v.restarts, Tools: len(v.tools)}
	if v.down != nil {
		st.Down = v.down.Error()
	}
	return st
}

// current returns the live connection, or why there is none.
func (v *server) current() (*conn, error) {
	v.mu.Lock()
	c, down := v.live, v.down
	v.mu.Unlock()
	switch {
	case v.s.closed.Load():
		return nil, ErrClosed
	case c == nil:
		return nil, fmt.Errorf("%w: %s (%v); it is being restarted", ErrServerDown, v.name, down)
	}
	return c, nil
}

// call calls tool remote over the live connection with ctx, which also
// ends when the connection does.
func (v *server) call(ctx context.Context, remote string, args json.RawMessage) (*sdk.CallToolResult, error) {
	c, err := v.current()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(context.Cause(c.life)) })
	defer stop()
	params := &sdk.CallToolParams{Name: remote, Arguments: args}
	if tp := spanid.Traceparent(ctx); tp != "" {
		// The call's execute_tool span, in _meta as the MCP spec's
		// trace-context convention has it.
		params.Meta = sdk.Meta{"traceparent": tp}
	}
	if tool.WantsProgress(ctx) {
		// _meta.progressToken asks the server for notifications/progress
		// of this call; they become the call's progress reports.
		token, forget := v.progress.add(ctx)
		if ctx.Done() != nil {
			// The SDK may hand a notification sent before the answer over
			// after it: the token lives as long as the call's context
			// (the engine's ends when the call returns).
			context.AfterFunc(ctx, forget)
		} else {
			defer forget()
		}
		params.SetProgressToken(token)
	}
	res, err := c.sess.CallTool(cctx, params)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("mcp server %s: %s: %w", v.name, remote, ctx.Err())
	}
	var werr *jsonrpc.Error
	if c.life.Err() == nil && errors.As(err, &werr) && !errors.Is(err, sdk.ErrConnectionClosed) {
		// The server answered with an error: it is fine, the call is not.
		return nil, fmt.Errorf("mcp server %s: %s: %w", v.name, remote, err)
	}
	// The connection failed under the call: the server is down. Its
	// watcher usually knows why (a process's exit status says more than
	// a closed pipe); a failure it cannot see (an HTTP request) ends the
	// connection here.
	grace, stopGrace := v.cfg.Clock.Timer(v.cfg.StopGrace)
	select {
	case <-c.life.Done():
	case <-grace:
		c.end(fmt.Errorf("a call failed: %w", err))
	case <-ctx.Done():
		c.end(fmt.Errorf("a call failed: %w", err))
	}
	stopGrace()
	cause := context.Cause(c.life)
	if errors.Is(cause, ErrClosed) {
		return nil, fmt.Errorf("%w (server %s, tool %s)", ErrClosed, v.name, remote)
	}
	return nil, fmt.Errorf("%w: server %s, tool %s: %v", ErrServerDied, v.name, remote, cause)
}
