package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// Fault is what one tool call, or one model turn, does instead of its
// work or before it. The zero Fault lets it through untouched.
type Fault struct {
	// Err fails it. A tool's error goes to the model as an error result it
	// can act on; a model turn's fails its agent (code model_error), or
	// restarts the agent after a backoff when Err wraps model.ErrTransient.
	// A model error that wraps neither is wrapped in model.ErrModel.
	Err error
	// Delay is waited first: virtual time in a testing/synctest bubble.
	// The context ending cuts it short, with the context's error.
	Delay time.Duration
	// Hang never answers: the call returns only when its context ends (a
	// tool call's timeout, Options.ToolTimeout; an abort; a shutdown). A
	// hanging model turn meets Options.ModelIdleTimeout.
	Hang bool
	// AfterChunks, for a model turn, lets this many chunks through before
	// the fault strikes (0: before the turn's first chunk). Tools ignore it.
	AfterChunks int
}

func (f Fault) zero() bool { return f.Err == nil && f.Delay == 0 && !f.Hang && f.AfterChunks == 0 }

// Call names the tool call or model turn a Faults function decides for.
type Call struct {
	// N numbers the calls of one wrapper, 1, 2, 3 … in the order they
	// arrive. Agents of a wave call at the same time, so with more than
	// one node running at once (Options.Concurrency) the order of their
	// calls varies from one test run to the next: pick by the fields
	// below for a fault that always hits the same agent.
	N       int
	RunID   messages.RunID
	AgentID string // "director", "synthesizer", a node's id (a worker), …
	Attempt int    // the agent's attempt, 1-based (restarts add one)
	Turn    int    // the agent's model turn, 1-based
	// Tool is the tool's name; empty for a model turn.
	Tool string
}

// Faults decides the fault of each call of a FaultyTool or FaultyModel.
// It is called from the calling agents' goroutines, one call at a time.
type Faults func(Call) Fault

// OnCalls injects f into the calls numbered n (Call.N) and no other.
func OnCalls(f Fault, n ...int) Faults {
	return func(c Call) Fault {
		if slices.Contains(n, c.N) {
			return f
		}
		return Fault{}
	}
}

// Always injects f into every call.
func Always(f Fault) Faults { return func(Call) Fault { return f } }

// ErrInjected is a ready-made error for Fault.Err.
var ErrInjected = errors.New("testkit: injected fault")

// faultCounter numbers the calls of one wrapper and asks its Faults.
type faultCounter struct {
	mu     sync.Mutex // serialises n and the calls of faults
	n      int
	faults Faults
}

func (fc *faultCounter) decide(c Call) Fault {
	if fc.faults == nil {
		return Fault{}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.n++
	c.N = fc.n
	return fc.faults(c)
}

// wait plays f's delay and hang; it returns ctx's error if ctx ended first.
func (f Fault) wait(ctx context.Context) error {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// FaultyTool is a tool with faults injected into its calls.
type FaultyTool struct {
	inner  tool.Tool
	counts faultCounter
}

var _ tool.Tool = (*FaultyTool)(nil)

// NewFaultyTool wraps inner: before each call, faults picks the call's
// fault; the call then waits (Delay, Hang), fails (Err) or goes to inner.
func NewFaultyTool(inner tool.Tool, faults Faults) *FaultyTool {
	return &FaultyTool{inner: inner, counts: faultCounter{faults: faults}}
}

// Def implements tool.Tool: inner's definition.
func (t *FaultyTool) Def() tool.Def { return t.inner.Def() }

// Call implements tool.Tool.
func (t *FaultyTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	info, _ := tool.CallInfoFrom(ctx)
	f := t.counts.decide(Call{RunID: info.RunID, AgentID: info.AgentID, Attempt: info.Attempt, Turn: info.Turn, Tool: t.inner.Def().Name})
	if err := f.wait(ctx); err != nil {
		return tool.Result{}, err
	}
	if f.Err != nil {
		return tool.Result{}, f.Err
	}
	return t.inner.Call(ctx, args)
}

// FaultyModel is a model with faults injected into its turns.
type FaultyModel struct {
	inner  model.Model
	counts *faultCounter
}

var _ model.Model = (*FaultyModel)(nil)

// NewFaultyModel wraps inner: before each turn, faults picks the turn's
// fault, which strikes after Fault.AfterChunks chunks.
func NewFaultyModel(inner model.Model, faults Faults) *FaultyModel {
	return &FaultyModel{inner: inner, counts: &faultCounter{faults: faults}}
}

// FaultyModels wraps every model f builds with faults; the calls of all
// of them are numbered together.
func FaultyModels(f model.Factory, faults Faults) model.Factory {
	counts := &faultCounter{faults: faults}
	return func(s messages.Scenario) (model.Model, error) {
		m, err := f(s)
		if err != nil {
			return nil, err
		}
		return &FaultyModel{inner: m, counts: counts}, nil
	}
}

// Name implements model.Model: inner's name.
func (m *FaultyModel) Name() string { return m.inner.Name() }

// Stream implements model.Model.
func (m *FaultyModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	f := m.counts.decide(Call{RunID: req.RunID, AgentID: req.AgentID, Attempt: req.Attempt, Turn: req.Turn})
	if f.zero() {
		return m.inner.Stream(ctx, req)
	}
	if f.AfterChunks == 0 {
		if err := f.strike(ctx); err != nil {
			return nil, err
		}
	}
	inner, err := m.inner.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &faultyStream{ctx: ctx, inner: inner, fault: f, struck: f.AfterChunks == 0}, nil
}

// strike plays a model fault: the wait, then the error, as a model error.
func (f Fault) strike(ctx context.Context) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	if f.Err == nil {
		return nil
	}
	if errors.Is(f.Err, model.ErrModel) || errors.Is(f.Err, model.ErrTransient) {
		return f.Err
	}
	return fmt.Errorf("%w: %w", model.ErrModel, f.Err)
}

// faultyStream lets fault.AfterChunks chunks through, then strikes.
type faultyStream struct {
	ctx    context.Context
	inner  model.Stream
	fault  Fault
	n      int
	struck bool
}

func (s *faultyStream) Recv() (model.Chunk, error) {
	if !s.struck && s.n == s.fault.AfterChunks {
		s.struck = true
		if err := s.fault.strike(s.ctx); err != nil {
			return nil, err
		}
	}
	c, err := s.inner.Recv()
	if err == nil {
		s.n++
	}
	return c, err
}

func (s *faultyStream) Close() error { return s.inner.Close() }
