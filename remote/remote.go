// Package remote is what the engine needs of a remote agent: a plan node
// whose Agent names one runs as that agent's task instead of a model's
// turns (actors: remote.go). The A2A client (transport/a2a/a2aclient)
// implements Agent; the operator fills a Registry at start (serve
// --a2a-agent).
package remote

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/conclave-ai/conclave/messages"
)

// ErrUnknownAgent: a node names an agent nobody registered.
var ErrUnknownAgent = errors.New("remote: unknown agent")

// ErrUnavailable: the agent is registered but could not be reached (or
// its agent card was refused) at start.
var ErrUnavailable = errors.New("remote: agent unavailable")

// Request is one call of a task: a new task (TaskID empty) with Text as
// its message; an answer to a task waiting for input (TaskID set, Text
// the answer); or, with Resubscribe, following a task already started
// (after a restart), with no message.
type Request struct {
	TaskID      string
	ContextID   string
	Text        string
	Resubscribe bool
}

// Outcome is how a call of a task ended.
type Outcome int

// Outcomes.
const (
	// Completed: the task finished; Result.Output is its answer.
	Completed Outcome = iota + 1
	// InputRequired: the task waits for an answer (Result.Input).
	InputRequired
	// Failed: the task failed, was rejected or was cancelled by the
	// remote; Result.Reason says why.
	Failed
)

// Result is the end of one call of a task.
type Result struct {
	TaskID    string
	ContextID string
	Outcome   Outcome
	// Output is the final answer (Completed).
	Output string
	// Reason is the remote's reason (Failed), with its final state.
	Reason string
	// Input is what the remote asks for (InputRequired).
	Input *Input
}

// Input is a remote task's request for input: a question, or an approval
// of a tool call when the remote says so.
type Input struct {
	Kind     messages.InterruptKind // info_request or tool_approval
	Question string
	ToolName string
	ToolArgs []byte // a JSON object, for tool_approval
}

// Agent runs tasks on one remote agent. Its methods are safe for
// concurrent use.
type Agent interface {
	// Run makes the call req and follows the task until it ends or waits
	// for input, calling emit, in order and from Run's goroutine, with
	// the node lane's events of the task: first a RemoteTaskPayload with
	// the task's id (before anything else of the task is followed), then
	// its text (TextDeltaPayload) and status (RemoteTaskPayload). Run
	// returns when ctx ends, with ctx's error; an error of emit ends it
	// with that error.
	Run(ctx context.Context, req Request, emit func(messages.Payload) error) (Result, error)
	// Cancel asks the remote to cancel task id.
	Cancel(ctx context.Context, taskID string) error
}

// Registry is the remote agents the operator registered, by name. Its
// zero value has none. It is filled before the engine starts and only
// read afterwards.
type Registry struct {
	agents map[string]entry
}

type entry struct {
	agent       Agent
	err         error // why it is unavailable
	description string
}

// Info is what a director is told of an available agent.
type Info struct {
	Name        string
	Description string
}

// Describe sets what agent name does (from its agent card), for the
// directors that plan with it; it is a no-op for an unknown name.
func (r *Registry) Describe(name, description string) {
	if e, ok := r.agents[name]; ok {
		e.description = description
		r.agents[name] = e
	}
}

// Available returns the agents that can be reached, by name.
func (r *Registry) Available() []Info {
	var out []Info
	for _, n := range r.Names() {
		if e := r.agents[n]; e.err == nil {
			out = append(out, Info{Name: n, Description: e.description})
		}
	}
	return out
}

// Add registers agent a as name; a non-nil err registers it as
// unavailable for that reason (a node that names it fails with it).
func (r *Registry) Add(name string, a Agent, err error) error {
	if name == "" {
		return errors.New("remote: an agent needs a name")
	}
	if _, dup := r.agents[name]; dup {
		return fmt.Errorf("remote: agent %q is registered twice", name)
	}
	if r.agents == nil {
		r.agents = map[string]entry{}
	}
	r.agents[name] = entry{agent: a, err: err}
	return nil
}

// Lookup returns agent name, or an error wrapping ErrUnknownAgent or
// ErrUnavailable. A nil Registry has no agent.
func (r *Registry) Lookup(name string) (Agent, error) {
	var e entry
	var ok bool
	if r != nil {
		e, ok = r.agents[name]
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownAgent, name, r.Names())
	case e.err != nil:
		return nil, fmt.Errorf("%w: %q: %w", ErrUnavailable, name, e.err)
	}
	return e.agent, nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	names := make([]string, 0, len(r.agents))
	for n := range r.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
