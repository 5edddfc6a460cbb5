package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/actors/coalesce"
	"github.com/conclave-ai/conclave/tool"
)

// Tool calls run off the agent's mailbox: each on a goroutine of the
// engine's tool group, as model turns do, with a context that ends when
// the agent stops (abort, run end, restart), when the engine shuts down,
// or at the tool's timeout. The result comes back to the agent as a
// toolDone message, which publishes tool_call_finished; the agent never
// waits. At most Config.ToolParallel calls of an agent run at once; the
// rest wait in call order. (The agent publishes the results of its
// working calls in call order: see agentActor.callAnswered.)

// callArgs is a call's arguments as the agent publishes and keeps them:
// "{}" for none, what the model sent when that is JSON, and otherwise that
// text as a JSON string, so that tool_call_started stays JSON and the
// model sees what it sent (argsError then refuses the call).
func callArgs(raw json.RawMessage) json.RawMessage {
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return json.RawMessage("{}")
	case json.Valid(raw):
		return raw
	}
	b, _ := json.Marshal(string(raw)) // a string always marshals (invalid UTF-8 becomes U+FFFD)
	return b
}

// argsError refuses arguments that are not a JSON object (callArgs turns
// text that is not JSON into a JSON string): the call gets an error result
// the model can act on, as a call of an unknown tool does.
func argsError(name string, args json.RawMessage) error {
	t := bytes.TrimSpace(args)
	if len(t) > 0 && t[0] == '{' {
		return nil
	}
	what := string(t)
	var s string
	if json.Unmarshal(t, &s) == nil {
		what = s // the model's text, not JSON
	}
	return fmt.Errorf("%w for %s: the arguments must be a JSON object; got %.200q", tool.ErrInvalidArgs, name, what)
}

// toolRuns are an agent's tool calls in progress.
type toolRuns struct {
	max     int
	running map[int]*toolRun // by call index in the turn
	queue   []toolStart
}

// toolRun is one call in progress; its identity tells a live result from
// a stale one (a call of an earlier turn, or of the agent's instance
// before a restart).
type toolRun struct {
	cancel context.CancelFunc
	// dropped: the agent no longer wants the result (it is stopping); the
	// goroutine does not send it, which would make a dead letter.
	dropped atomic.Bool
}

// toolStart is a call ready to run.
type toolStart struct {
	idx  int
	t    tool.Tool
	def  tool.Def
	args json.RawMessage
	info tool.CallInfo // given to the tool in its context
	// span is the span context of the call's execute_tool span (toolSpan),
	// given to the tool in its context; invalid when not tracing.
	span trace.SpanContext
}

// toolProgress is a progress report of a running call, sent to its
// agent through the call's coalescing gate (at most one per
// Config.ProgressInterval), which publishes it while the call is live.
type toolProgress struct {
	run *toolRun
	idx int
	p   tool.Progress
}

// toolDone is a call's outcome, sent by its goroutine to its agent.
type toolDone struct {
	run *toolRun
	idx int
	res tool.Result
	err error
}

// start runs the call now, or queues it behind the calls running.
func (r *toolRuns) start(ctx actor.Context, e *Engine, s toolStart) {
	if r.running == nil {
		r.running = map[int]*toolRun{}
	}
	if len(r.running) >= r.max {
		r.queue = append(r.queue, s)
		return
	}
	timeout := s.def.Timeout
	if timeout <= 0 {
		timeout = e.cfg.ToolTimeout
	}
	base := tool.WithCallInfo(e.toolCtx, s.info)
	if s.span.IsValid() {
		base = trace.ContextWithRemoteSpanContext(base, s.span)
	}
	run := &toolRun{}
	root, self := ctx.ActorSystem().Root, sendablePID(ctx.Self())
	// The gate sends under its lock and is closed before done is sent, so
	// every report it lets through reaches the agent before the result.
	gate := coalesce.New(coalesce.Config{Interval: e.cfg.ProgressInterval}, func(p tool.Progress) {
		if !run.dropped.Load() {
			root.Send(self, &toolProgress{run: run, idx: s.idx, p: p})
		}
	})
	base = tool.WithProgress(base, gate.Offer)
	cctx, cancel := context.WithTimeout(base, timeout)
	run.cancel = cancel
	r.running[s.idx] = run
	done := &toolDone{run: run, idx: s.idx}
	started := e.toolRuns.Go(func() {
		defer cancel()
		done.res, done.err = callTool(cctx, s)
		gate.Close()
		if !run.dropped.Load() {
			root.Send(self, done)
		}
	})
	if !started {
		gate.Close()
		cancel()
		done.err = ErrShuttingDown
		root.Send(self, done)
	}
}

// callTool runs one call, turning a panic and a timeout into errors.
func callTool(ctx context.Context, s toolStart) (res tool.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = tool.Result{}, fmt.Errorf("%s panicked: %v", s.def.Name, v)
		}
	}()
	res, err = s.t.Call(ctx, s.args)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%s timed out: %w", s.def.Name, err)
	}
	return res, err
}

// live reports whether a progress report is of a call still running.
func (r *toolRuns) live(m *toolProgress) bool { return r.running[m.idx] == m.run }

// finished takes a call's outcome, starts the next queued call, and
// reports whether the outcome is live (false: stale, to be dropped).
func (r *toolRuns) finished(ctx actor.Context, e *Engine, d *toolDone) bool {
	if r.running[d.idx] != d.run {
		return false
	}
	d.run.cancel()
	delete(r.running, d.idx)
	if len(r.queue) > 0 {
		n := r.queue[0]
		r.queue = r.queue[1:]
		r.start(ctx, e, n)
	}
	return true
}

// cancelAll ends every call in progress and drops the queued ones; their
// results, if any still come, are stale.
func (r *toolRuns) cancelAll() {
	for idx, run := range r.running {
		run.dropped.Store(true)
		run.cancel()
		delete(r.running, idx)
	}
	r.queue = nil
}
