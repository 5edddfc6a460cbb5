package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
)

// subagent is one sub-agent child of an agent (delegate or
// start_async_task), as its parent keeps it.
type subagent struct {
	pid      *actor.PID
	shared   *agentShared
	agentID  string
	lane     messages.Lane
	idx      int // index of its call in results
	reported bool
	seq      int // its place in the agent's delegations, 1-based
	cites    []messages.Citation
	async    bool // an async task: its call was answered at start
	taskID   string
	cancel   bool // cancel_async_task stopped it
}

// subagentSet is an agent's sub-agent children, by their pid's Id: the
// delegation bookkeeping its parent reads to know which have reported,
// which are async tasks and which still hold a lane open. Only the parent
// agent touches it (its supervisor strategy, subGroup, reads it too).
type subagentSet map[string]*subagent

// live reports whether a sub-agent has not closed its lane.
func (ss subagentSet) live() bool {
	for _, sub := range ss {
		if !sub.reported && sub.shared.done.Load() == nil {
			return true
		}
	}
	return false
}

// stopLive stops every sub-agent that has not closed its lane.
func (ss subagentSet) stopLive(ctx actor.Context) {
	for _, sub := range ss {
		if !sub.reported && sub.shared.done.Load() == nil {
			ctx.Stop(sub.pid)
		}
	}
}

// asyncLive reports whether an async sub-agent has not ended yet: still
// working, or cancelled and not yet terminated (its lane still open).
func (ss subagentSet) asyncLive() bool {
	for _, s := range ss {
		if s.async && !s.reported {
			return true
		}
	}
	return false
}

// byTask is the async sub-agent of task id, nil if none.
func (ss subagentSet) byTask(id string) *subagent {
	for _, s := range ss {
		if s.async && s.taskID == id {
			return s
		}
	}
	return nil
}
