package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// ModelFaults are what a simulated model does besides streaming its
// chunks. Every decision is drawn from the seed and the gate's key, so it
// does not depend on the order things happen in.
type ModelFaults struct {
	// GateRate is the chance that a chunk after a stream's first waits for
	// the driver (1: every chunk, so streams interleave finely; 0: a
	// stream, once started, runs to its end in one step).
	GateRate float64 `json:"gate_rate"`
	// ErrorRate is the chance that a gate fails the turn with a model
	// error (model.ErrModel: the agent fails).
	ErrorRate float64 `json:"error_rate,omitempty"`
	// TransientRate is the chance that a gate fails the turn with a
	// transient error (model.ErrTransient: the agent is restarted after a
	// backoff, up to the restart limit).
	TransientRate float64 `json:"transient_rate,omitempty"`
}

// ToolFaults are what a simulated tool does besides answering.
type ToolFaults struct {
	// ErrorRate is the chance that a call fails (the model gets an error result).
	ErrorRate float64 `json:"error_rate,omitempty"`
	// SlowRate is the chance that a call takes up to Slow of (virtual) time.
	SlowRate float64       `json:"slow_rate,omitempty"`
	Slow     time.Duration `json:"slow,omitempty"`
	// HangRate is the chance that a call never answers: it returns only
	// when its context ends (the tool timeout, an abort, a shutdown). At
	// most one call of an agent's turn hangs (its first or second), so
	// that two timeouts never fire at the same instant.
	HangRate float64 `json:"hang_rate,omitempty"`
}

// chance is a number in [0, 1) drawn from the seed, a key and a salt.
func chance(seed uint64, key, salt string) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	io.WriteString(h, key)
	h.Write([]byte{0})
	io.WriteString(h, salt)
	return float64(h.Sum64()>>11) / (1 << 53)
}

// counter numbers the things of one name, so that a name reached again (a
// turn streamed again after a restart) gets a key of its own.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) next(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return fmt.Sprintf("%s #%d", name, c.n[name])
}

// Model wraps a model so that it joins a simulation: each stream waits at
// a gate before it starts, before some of its chunks (ModelFaults) and
// before its end, and the faults are injected there. Any model.Model works (your own
// included) as long as it is deterministic for the same request.
type Model struct {
	inner  model.Model
	sched  *Scheduler
	seed   uint64
	faults ModelFaults
	keys   counter
	// tag names the engine the model runs for in its gates' keys (a
	// cluster node; "" for the one server).
	tag string
	// observe, when set, is told of every chunk a stream hands out (the
	// simulator's backpressure check).
	observe func(req *model.Request, c model.Chunk)
}

// WrapModel returns inner as a simulated model.
func WrapModel(inner model.Model, sched *Scheduler, seed uint64, faults ModelFaults) *Model {
	return &Model{inner: inner, sched: sched, seed: seed, faults: faults}
}

// Name implements model.Model.
func (m *Model) Name() string { return m.inner.Name() }

// Stream implements model.Model.
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	key := m.keys.next(fmt.Sprintf("model %s %s %s a%d t%d r%d%s", req.RunID, req.Role, req.AgentID, req.Attempt, req.Turn, req.Round, m.tag))
	st := &simStream{m: m, ctx: ctx, req: req, key: key}
	if err := st.gate(0); err != nil {
		return nil, err
	}
	inner, err := m.inner.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	st.inner = inner
	return st, nil
}

type simStream struct {
	m     *Model
	ctx   context.Context
	req   model.Request
	key   string
	inner model.Stream
	n     int // chunks handed out
}

// gate waits at chunk i's gate, when it has one, and injects its fault.
func (s *simStream) gate(i int) error {
	at := fmt.Sprintf("%s c%d", s.key, i)
	if i > 0 && chance(s.m.seed, at, "gate") >= s.m.faults.GateRate {
		return nil
	}
	if err := s.m.sched.Gate(s.ctx, at); err != nil {
		return err
	}
	switch p := chance(s.m.seed, at, "fault"); {
	case p < s.m.faults.ErrorRate:
		return fmt.Errorf("%w: sim: injected model error at %s", model.ErrModel, at)
	case p < s.m.faults.ErrorRate+s.m.faults.TransientRate:
		return fmt.Errorf("%w: sim: injected transient error at %s", model.ErrTransient, at)
	}
	return nil
}

func (s *simStream) Recv() (model.Chunk, error) {
	if s.n > 0 {
		if err := s.gate(s.n); err != nil {
			return nil, err
		}
	}
	c, err := s.inner.Recv()
	if err == io.EOF {
		// The end waits too: what it sets off (the agent's turn done, a
		// run's end) is a step of its own, which an abort can race.
		if err := s.m.sched.Gate(s.ctx, s.key+" end"); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	if err == nil {
		s.n++
		if s.m.observe != nil {
			s.m.observe(&s.req, c)
		}
	}
	return c, err
}

func (s *simStream) Close() error { return s.inner.Close() }

// Tool wraps a tool so that it joins a simulation: each call waits at a
// gate (named by its run, agent, turn and call id: tool.CallInfoFrom)
// before it answers, and the faults of ToolFaults are injected.
type Tool struct {
	inner  tool.Tool
	sched  *Scheduler
	seed   uint64
	faults ToolFaults
	keys   counter
	tag    string // as Model's
}

// WrapTool returns inner as a simulated tool.
func WrapTool(inner tool.Tool, sched *Scheduler, seed uint64, faults ToolFaults) *Tool {
	return &Tool{inner: inner, sched: sched, seed: seed, faults: faults}
}

// Def implements tool.Tool.
func (t *Tool) Def() tool.Def { return t.inner.Def() }

// ErrInjected is the error of a call failed by ToolFaults.ErrorRate.
var ErrInjected = errors.New("sim: injected tool failure")

// Call implements tool.Tool.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	info, _ := tool.CallInfoFrom(ctx)
	turn := fmt.Sprintf("tool %s %s a%d t%d", info.RunID, info.AgentID, info.Attempt, info.Turn)
	key := t.keys.next(fmt.Sprintf("%s %s %s%s", turn, info.CallID, t.Def().Name, t.tag))
	f := t.faults
	if f.HangRate > 0 && chance(t.seed, turn, "hang") < f.HangRate && info.Index == int(chance(t.seed, turn, "victim")*2) {
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}
	if f.SlowRate > 0 && chance(t.seed, key, "slow") < f.SlowRate {
		d := time.Duration(chance(t.seed, key, "slow-for") * float64(f.Slow))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}
	if err := t.sched.Gate(ctx, key); err != nil {
		return tool.Result{}, err
	}
	if chance(t.seed, key, "error") < f.ErrorRate {
		return tool.Result{}, fmt.Errorf("%w (%s)", ErrInjected, key)
	}
	return t.inner.Call(ctx, args)
}
